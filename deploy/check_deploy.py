"""Checks deploy/ against the server it deploys (run by deploy_test.sh).

Every metric name the dashboard, the alerts and the autoscaler query must be
one a live primserve exports (or, for GPU-only metrics, one server/engine/metrics.cc
declares); every flag the image definitions and the manifests pass must exist; the
Containerfile (built in CI) and the Dockerfile (Docker, from source) must make
the same image, which the Deployment must start as it is (entrypoint, user,
ports, nothing exec'd that the image lacks); the Kubernetes objects must have
the fields and cross-references a GPU deployment needs. Prints each problem and exits 1 if there is any.
"""

import argparse
import glob
import json
import os
import re
import sys

import yaml

# Metrics only a CUDA backend sets (its device memory, per-device counters
# and health; the page-locked payload and answer pools, which a backend that
# pins no host memory has not), so a CPU server's scrape lacks them.
GPU_ONLY_METRICS = {
    "primserve_gpu_memory_bytes",
    "primserve_pinned_host_bytes",
    "primserve_device_requests_total",
    "primserve_device_bytes_total",
    "primserve_device_kernel_seconds_total",
    "primserve_device_up",
}

problems = []


def problem(message):
    problems.append(message)


def metric_names(promql):
    return set(re.findall(r"\bprimserve_[a-z0-9_]+", promql))


def flags_in_help(help_text):
    """Flag names from absl's --helpfull output: '    --name (help); default: ...'."""
    return set(re.findall(r"^\s+--([a-z0-9_]+) \(", help_text, re.MULTILINE))


def flag_values(args):
    """{'port': '50051', ...} from ['--port=50051', ...]."""
    values = {}
    for arg in args:
        match = re.fullmatch(r"--([a-z0-9_]+)(?:=(.*))?", arg)
        if match:
            values[match.group(1)] = match.group(2)
    return values


def check_flags(where, args, known):
    for name in flag_values(args):
        if name not in known:
            problem(f"{where}: --{name} is not a flag of the binary (see its --helpfull)")


def queryable_names(scrape, metrics_source):
    """Sample names a server exports: the live scrape plus declared GPU-only ones."""
    scraped = set()
    for line in scrape.splitlines():
        if line and not line.startswith("#"):
            scraped.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    declared = set(re.findall(r'\.Name\("(primserve_[a-z0-9_]+)"\)', metrics_source))
    if not declared:
        problem("server/engine/metrics.cc declares no primserve_ metric: has the source moved?")
    for name in declared - GPU_ONLY_METRICS:
        if name not in scraped and name + "_count" not in scraped:
            problem(f"{name} is declared in metrics.cc but missing from the live scrape")
    for name in GPU_ONLY_METRICS:
        if name not in declared:
            problem(f"{name} (GPU-only) is no longer declared in server/engine/metrics.cc")
    return scraped | (GPU_ONLY_METRICS & declared)


def check_names(where, promql, queryable):
    for name in sorted(metric_names(promql) - queryable):
        problem(f"{where}: {name} is not a metric primserve exports")


def check_dashboard(path, queryable):
    try:
        with open(path) as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        problem(f"{path}: {e}")
        return
    for field in ("uid", "title", "panels"):
        if not dashboard.get(field):
            problem(f"{path}: no {field}")
    panels = [p for p in dashboard.get("panels", []) if p.get("type") != "row"]
    ids = [p.get("id") for p in dashboard.get("panels", [])]
    if len(ids) != len(set(ids)):
        problem(f"{path}: panel ids are not unique")
    all_exprs = []
    for panel in panels:
        exprs = [t.get("expr", "") for t in panel.get("targets", [])]
        if not exprs or not all(exprs):
            problem(f"{path}: panel '{panel.get('title')}' has a target without a query")
        for expr in exprs:
            check_names(f"{path}: panel '{panel.get('title')}'", expr, queryable)
        all_exprs.extend(exprs)
    joined = "\n".join(all_exprs)
    # What the dashboard must show.
    for needed, what in [
        ("rate(primserve_requests_total", "request rate"),
        ('code=~"', "error ratio"),
        ("histogram_quantile(0.5, sum by (rpc, le)", "p50 by RPC"),
        ("histogram_quantile(0.99, sum by (rpc, le)", "p99 by RPC"),
        ("sum by (stage)", "stage breakdown"),
        ("primserve_batch_size_requests", "batch size"),
        ("primserve_queue_depth", "queue depth"),
        ("primserve_gpu_memory_bytes", "GPU memory"),
        ("primserve_device_up", "devices in service"),
        ("primserve_device_requests_total", "requests per device"),
    ]:
        if needed not in joined:
            problem(f"{path}: no panel shows {what} (no query contains '{needed}')")


def check_alerts(path, queryable):
    with open(path) as f:
        rules = yaml.safe_load(f)
    alerts = {}
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            alerts[rule.get("alert")] = rule
            check_names(f"{path}: {rule.get('alert')}", rule.get("expr", ""), queryable)
            if rule.get("labels", {}).get("severity") not in ("page", "ticket"):
                problem(f"{path}: {rule.get('alert')} has no severity page or ticket")
            if not rule.get("annotations", {}).get("summary"):
                problem(f"{path}: {rule.get('alert')} has no summary")
    for needed in ("PrimserveDown", "PrimserveHighErrorRatio", "PrimserveP99LatencyHigh",
                   "PrimserveQueueSaturated", "PrimserveGpuMemoryNearBudget",
                   "PrimserveDeviceLost"):
        if needed not in alerts:
            problem(f"{path}: no {needed} alert")


def exec_commands(container):
    """Every command the kubelet would exec in the container: hooks and probes."""
    commands = []
    for hook in container.get("lifecycle", {}).values():
        commands.append(hook.get("exec", {}).get("command"))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        commands.append(container.get(probe, {}).get("exec", {}).get("command"))
    return [c for c in commands if c]


def check_container_against_image(container, pod_spec, image):
    """The container starts the image's entrypoint as the image's user, and
    execs only what the image holds."""
    if image is None:
        return
    command = container.get("command")
    if command is not None and command != image["entrypoint"]:
        problem(f"Deployment: command {command} replaces the image's ENTRYPOINT "
                f"{image['entrypoint']}")
    uid = image["user"].split(":")[0]
    run_as = container.get("securityContext", {}).get("runAsUser",
                                                      pod_spec.get("securityContext", {}).get("runAsUser"))
    if run_as is not None and str(run_as) != uid:
        problem(f"Deployment: runAsUser {run_as} is not the image's USER {uid}")
    tools = os.path.dirname(image["entrypoint"][0])
    for exec_command in exec_commands(container):
        if os.path.dirname(exec_command[0]) != tools:
            problem(f"Deployment: execs {exec_command[0]}, which the image (no shell, only "
                    f"{tools}) does not hold")
    for port in container.get("ports", []):
        if str(port.get("containerPort")) not in image["exposed"]:
            problem(f"Deployment: port {port.get('containerPort')} is not EXPOSEd by the image")


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_edge(edge, primserve_flags, pod_spec, haproxy_cfg):
    """The edge sidecar runs deploy/haproxy.cfg, bound where clients reach the
    pod, forwarding to primserve's loopback port; primserve listens nowhere
    else and tells callers apart by the header the edge sets."""
    env = {e.get("name"): e.get("value") for e in edge.get("env", [])}
    for name in ("PRIMSERVE_EDGE_BIND", "PRIMSERVE_UPSTREAM"):
        if f"${{{name}}}" not in haproxy_cfg:
            problem(f"deploy/haproxy.cfg does not use {name}")
        if not env.get(name):
            problem(f"Deployment: the edge sets no {name}")
    if primserve_flags.get("host") != "127.0.0.1":
        problem(f"Deployment: primserve listens on --host={primserve_flags.get('host')}; behind the "
                "edge it must listen on loopback only (--host=127.0.0.1)")
    upstream = f"127.0.0.1:{primserve_flags.get('port')}"
    if env.get("PRIMSERVE_UPSTREAM") != upstream:
        problem(f"Deployment: the edge forwards to {env.get('PRIMSERVE_UPSTREAM')}, not primserve's "
                f"{upstream}")
    if "x-forwarded-for" not in haproxy_cfg or primserve_flags.get("caller_header") != "x-forwarded-for":
        problem("Deployment: primserve must key callers by the edge's x-forwarded-for "
                "(--caller_header=x-forwarded-for)")
    bind_port = (env.get("PRIMSERVE_EDGE_BIND") or ":").rsplit(":", 1)[1]
    edge_ports = {p.get("name"): p.get("containerPort") for p in edge.get("ports", [])}
    if str(edge_ports.get("grpc")) != bind_port:
        problem(f"Deployment: the edge's port 'grpc' ({edge_ports.get('grpc')}) is not where it "
                f"binds ({bind_port})")
    check_metrics_behind_edge(env, edge_ports, primserve_flags, haproxy_cfg)
    mounted = {m.get("name") for m in edge.get("volumeMounts", [])}
    config_maps = [v for v in pod_spec.get("volumes", [])
                   if v.get("name") in mounted and "configMap" in v]
    if not config_maps:
        problem("Deployment: the edge mounts no ConfigMap for its haproxy.cfg")
    edge_stop = edge.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    return edge_stop


def check_metrics_behind_edge(env, edge_ports, primserve_flags, haproxy_cfg):
    """primserve serves /metrics on loopback only, and the edge's metrics
    frontend, with its source ACL, is the pod's 'metrics' port in front of it."""
    for name in ("PRIMSERVE_METRICS_BIND", "PRIMSERVE_METRICS_UPSTREAM", "PRIMSERVE_METRICS_ALLOW"):
        if f"${{{name}" not in haproxy_cfg:
            problem(f"deploy/haproxy.cfg does not use {name}")
        if not env.get(name):
            problem(f"Deployment: the edge sets no {name}")
    # Unset, --metrics_host is loopback (deploy_test checks the default).
    if primserve_flags.get("metrics_host", "127.0.0.1") != "127.0.0.1":
        problem(f"Deployment: primserve serves metrics on --metrics_host="
                f"{primserve_flags.get('metrics_host')}; behind the edge it must be loopback only "
                "(127.0.0.1)")
    upstream = f"127.0.0.1:{primserve_flags.get('metrics_port')}"
    if env.get("PRIMSERVE_METRICS_UPSTREAM") != upstream:
        problem(f"Deployment: the edge passes scrapes to {env.get('PRIMSERVE_METRICS_UPSTREAM')}, "
                f"not primserve's metrics at {upstream}")
    bind_port = (env.get("PRIMSERVE_METRICS_BIND") or ":").rsplit(":", 1)[1]
    if str(edge_ports.get("metrics")) != bind_port:
        problem(f"Deployment: the edge's port 'metrics' ({edge_ports.get('metrics')}) is not where "
                f"its metrics frontend binds ({bind_port})")


def check_kubernetes(k8s_dir, server_flags, queryable, image, haproxy_cfg):
    objects = []
    for path in sorted(glob.glob(os.path.join(k8s_dir, "*.yaml"))):
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        if os.path.basename(path) == "prometheus-adapter-rules.yaml":
            for rule in docs[0].get("rules", []):
                check_names(path, rule.get("seriesQuery", ""), queryable)
                check_names(path, rule.get("name", {}).get("as", ""), queryable)
            continue
        for doc in docs:
            for field in ("apiVersion", "kind"):
                if not doc.get(field):
                    problem(f"{path}: an object has no {field}")
            if not doc.get("metadata", {}).get("name"):
                problem(f"{path}: a {doc.get('kind')} has no metadata.name")
            objects.append(doc)
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj.get("kind"), []).append(obj)

    deployments = by_kind.get("Deployment", [])
    if len(deployments) != 1:
        problem(f"expected one Deployment, found {len(deployments)}")
        return
    deployment = deployments[0]
    spec = deployment["spec"]
    pod = spec["template"]
    pod_labels = pod["metadata"].get("labels", {})
    if not matches(spec.get("selector", {}).get("matchLabels"), pod_labels):
        problem("Deployment: selector does not match the pod template's labels")
    containers = {c.get("name"): c for c in pod["spec"].get("containers", [])}
    if sorted(containers) != ["edge", "primserve"]:
        problem(f"Deployment: expected the containers primserve and edge, found {sorted(containers)}")
        return
    container = containers["primserve"]
    args = container.get("args", [])
    check_flags("Deployment args", args, server_flags)
    flags = flag_values(args)
    edge_stop = check_edge(containers["edge"], flags, pod["spec"], haproxy_cfg)
    # Clients, probes and Prometheus reach primserve through the edge's ports.
    ports = {p.get("name"): p.get("containerPort")
             for c in containers.values() for p in c.get("ports", [])}
    if container.get("ports"):
        problem("Deployment: the primserve container declares ports; it listens on loopback only, "
                "behind the edge's")
    limits = container.get("resources", {}).get("limits", {})
    if str(limits.get("nvidia.com/gpu")) != "1":
        problem("Deployment: the container must limit nvidia.com/gpu to 1 (one replica per GPU)")
    for probe in ("readinessProbe", "livenessProbe"):
        grpc_probe = container.get(probe, {}).get("grpc")
        if not grpc_probe:
            problem(f"Deployment: {probe} is not a gRPC health probe")
        elif grpc_probe.get("port") != ports.get("grpc"):
            problem(f"Deployment: {probe} probes port {grpc_probe.get('port')}, not the gRPC port")
    grace = float(flags.get("shutdown_grace_seconds") or 0)
    if "shutdown_grace_seconds" not in flags:
        problem("Deployment: args do not set --shutdown_grace_seconds")
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    # The image has no shell and no sleep binary: Kubernetes' own sleep action.
    pre_stop_seconds = pre_stop.get("sleep", {}).get("seconds", 0)
    if pre_stop_seconds <= 0:
        problem("Deployment: no preStop sleep action (lifecycle.preStop.sleep.seconds) to let "
                "endpoint and DNS updates reach clients before the drain")
    # The metrics HTTP server can take 2 s to stop after the gRPC drain.
    if pod["spec"].get("terminationGracePeriodSeconds", 30) <= pre_stop_seconds + grace + 2:
        problem("Deployment: terminationGracePeriodSeconds must exceed the preStop sleep plus "
                "--shutdown_grace_seconds plus 2 s")
    if edge_stop < pre_stop_seconds + grace + 2:
        problem("Deployment: the edge's preStop sleep must outlast primserve's drain (its preStop "
                "sleep plus --shutdown_grace_seconds plus 2 s), or calls lose their path mid-drain")
    if pod["spec"].get("terminationGracePeriodSeconds", 30) <= edge_stop:
        problem("Deployment: terminationGracePeriodSeconds must exceed the edge's preStop sleep")
    if not pod["spec"].get("securityContext", {}).get("runAsNonRoot"):
        problem("Deployment: the pod must run as non-root")
    check_container_against_image(container, pod["spec"], image)

    services = by_kind.get("Service", [])
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    if not headless:
        problem("no headless Service (clusterIP: None) for client-side round robin")
    for service in services:
        name = service["metadata"]["name"]
        if not matches(service["spec"].get("selector"), pod_labels):
            problem(f"Service {name}: selector does not match the pods")
        for port in service["spec"].get("ports", []):
            if port.get("targetPort") not in ports and port.get("targetPort") not in ports.values():
                problem(f"Service {name}: targetPort {port.get('targetPort')} is no container port")
    if not any("grpc" in [p.get("name") for p in s["spec"].get("ports", [])] for s in headless):
        problem("the headless Service does not expose the grpc port")

    monitors = by_kind.get("PodMonitor", []) + by_kind.get("ServiceMonitor", [])
    if not monitors:
        problem("no PodMonitor or ServiceMonitor")
    for monitor in by_kind.get("PodMonitor", []):
        if not matches(monitor["spec"].get("selector", {}).get("matchLabels"), pod_labels):
            problem("PodMonitor: selector does not match the pods")
        for endpoint in monitor["spec"].get("podMetricsEndpoints", []):
            if endpoint.get("port") != "metrics":
                problem("PodMonitor: scrapes a port other than 'metrics'")

    pdbs = by_kind.get("PodDisruptionBudget", [])
    if not pdbs:
        problem("no PodDisruptionBudget")
    for pdb in pdbs:
        if "maxUnavailable" not in pdb["spec"] and "minAvailable" not in pdb["spec"]:
            problem("PodDisruptionBudget: sets neither maxUnavailable nor minAvailable")
        if not matches(pdb["spec"].get("selector", {}).get("matchLabels"), pod_labels):
            problem("PodDisruptionBudget: selector does not match the pods")

    hpas = by_kind.get("HorizontalPodAutoscaler", [])
    if not hpas:
        problem("no HorizontalPodAutoscaler")
    for hpa in hpas:
        target = hpa["spec"].get("scaleTargetRef", {})
        if target.get("kind") != "Deployment" or target.get("name") != deployment["metadata"]["name"]:
            problem("HorizontalPodAutoscaler: does not scale the Deployment")
        if hpa["spec"].get("maxReplicas", 0) < hpa["spec"].get("minReplicas", 1):
            problem("HorizontalPodAutoscaler: maxReplicas < minReplicas")
        custom = [m for m in hpa["spec"].get("metrics", []) if m.get("type") in ("Pods", "Object", "External")]
        if not custom:
            problem("HorizontalPodAutoscaler: no custom metric")
        for metric in custom:
            source = metric[metric["type"].lower()]
            check_names("HorizontalPodAutoscaler", source.get("metric", {}).get("name", ""), queryable)


def dockerfile_instructions(path):
    """(instruction, argument) pairs, continuation lines joined, comments dropped."""
    with open(path) as f:
        text = re.sub(r"\\\n", " ", "\n".join(l for l in f.read().splitlines()
                                              if not l.lstrip().startswith("#")))
    pairs = []
    for line in text.splitlines():
        if line.strip():
            instruction, _, argument = line.strip().partition(" ")
            pairs.append((instruction.upper(), argument.strip()))
    return pairs


def exec_form(argument):
    try:
        words = json.loads(argument)
    except ValueError:
        return None
    return words if isinstance(words, list) else None


def final_stage(path):
    """The instructions after the last FROM, and the number of stages."""
    instructions = dockerfile_instructions(path)
    froms = [n for n, (i, _) in enumerate(instructions) if i == "FROM"]
    if not froms:
        problem(f"{path}: no FROM")
        return [], 0
    return instructions[froms[-1]:], len(froms)


def check_image_definition(path, server_flags, client_flags):
    """Checks one image definition's final stage; returns what a runtime
    starts: {'user', 'entrypoint', 'cmd', 'exposed'}, or None."""
    stage, _ = final_stage(path)
    if not stage:
        return None
    if stage[0][1] != "scratch":
        problem(f"{path}: the final stage is FROM {stage[0][1]}, not scratch")
    users = [a for i, a in stage if i == "USER"]
    user = users[-1] if users else ""
    if not re.fullmatch(r"[0-9]+(:[0-9]+)?", user) or user.split(":")[0] == "0":
        problem(f"{path}: the image must run as a numeric non-root USER (Kubernetes' runAsNonRoot "
                f"can only verify a number), not '{user}'")
    healthchecks = [a for i, a in stage if i == "HEALTHCHECK"]
    if not healthchecks:
        problem(f"{path}: no HEALTHCHECK")
    for healthcheck in healthchecks:
        command = exec_form(healthcheck[healthcheck.find("CMD") + 3:].strip())
        if not command or not command[0].endswith("primctl") or command[-1] != "health":
            problem(f"{path}: HEALTHCHECK is not an exec-form 'primctl ... health'")
        else:
            check_flags(f"{path}: HEALTHCHECK", command[1:-1], client_flags)
    entrypoint = [exec_form(a) for i, a in stage if i == "ENTRYPOINT"]
    if not entrypoint or not entrypoint[-1] or not entrypoint[-1][0].endswith("/primserve"):
        problem(f"{path}: ENTRYPOINT is not an exec-form primserve")
        return None
    cmd = [exec_form(a) for i, a in stage if i == "CMD"]
    if not cmd or not cmd[-1]:
        problem(f"{path}: no exec-form CMD with the server's flags")
        return None
    check_flags(f"{path}: CMD", cmd[-1], server_flags)
    flags = flag_values(cmd[-1])
    exposed = " ".join(a for i, a in stage if i == "EXPOSE").split()
    for flag in ("port", "metrics_port"):
        if flags.get(flag) not in exposed:
            problem(f"{path}: --{flag}={flags.get(flag)} is not EXPOSEd")
    return {"user": user, "entrypoint": entrypoint[-1], "cmd": cmd[-1], "exposed": exposed}


def check_images(containerfile, dockerfile, server_flags, client_flags):
    """The Containerfile (built in CI) and the Dockerfile (from source) must
    make the same image; returns the Containerfile's check_image_definition."""
    image = check_image_definition(containerfile, server_flags, client_flags)
    check_image_definition(dockerfile, server_flags, client_flags)
    if final_stage(dockerfile)[1] < 2:
        problem(f"{dockerfile}: no build stage")
    # Past FROM and the COPY of the root filesystem, line for line.
    ours, theirs = (final_stage(path)[0][2:] for path in (containerfile, dockerfile))
    if ours != theirs:
        problem(f"{dockerfile}: its final stage differs from {containerfile}'s")
    return image


def check_prometheus_config(path, server_help):
    with open(path) as f:
        config = yaml.safe_load(f)
    default = re.search(r"--metrics_port \(.*?\); default: (\d+);", server_help, re.DOTALL)
    if not default:
        problem("primserve --helpfull shows no --metrics_port default")
        return
    for job in config.get("scrape_configs", []):
        for static in job.get("static_configs", []):
            for target in static.get("targets", []):
                if target.rpartition(":")[2] != default.group(1):
                    problem(f"{path}: target {target} is not on the default --metrics_port "
                            f"{default.group(1)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deploy_dir", required=True)
    parser.add_argument("--scrape", required=True, help="a live server's /metrics")
    parser.add_argument("--metrics_source", required=True, help="server/engine/metrics.cc")
    parser.add_argument("--server_help", required=True, help="primserve --helpfull")
    parser.add_argument("--client_help", required=True, help="primctl --helpfull")
    options = parser.parse_args()

    def read(path):
        with open(path) as f:
            return f.read()

    queryable = queryable_names(read(options.scrape), read(options.metrics_source))
    server_help = read(options.server_help)
    server_flags = flags_in_help(server_help)
    client_flags = flags_in_help(read(options.client_help))
    if "metrics_port" not in server_flags or "address" not in client_flags:
        problem("could not read the flags from the --helpfull outputs")
    deploy = options.deploy_dir
    check_dashboard(os.path.join(deploy, "grafana", "primserve-dashboard.json"), queryable)
    check_alerts(os.path.join(deploy, "alerts.yml"), queryable)
    image = check_images(os.path.join(deploy, "Containerfile"), os.path.join(deploy, "Dockerfile"),
                         server_flags, client_flags)
    check_kubernetes(os.path.join(deploy, "k8s"), server_flags, queryable, image,
                     read(os.path.join(deploy, "haproxy.cfg")))
    check_prometheus_config(os.path.join(deploy, "prometheus.yml"), server_help)

    for message in problems:
        print("FAIL:", message)
    if problems:
        return 1
    print(f"deploy/ is consistent with the server ({len(queryable)} queryable metric names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
