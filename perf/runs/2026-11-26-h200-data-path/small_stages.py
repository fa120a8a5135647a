"""Where 1K-scan time goes under load: for unary scans, Echo and Multiplex
scans at 256 outstanding (primload, 4 channels, as gpu_engine_bench.sh), the
server's CPU (cores busy, from /proc), primload's CPU, and the server's stage
histograms over the load alone (queue, h2d, kernel, d2h, total; batch sizes).
python3 small_stages.py BUNDLE OUT_DIR"""
import os, re, resource, subprocess, sys, time, urllib.request

bundle, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(bundle, "lib"))
port, mport = 50065, 9475
tick = os.sysconf("SC_CLK_TCK")
server = subprocess.Popen([os.path.join(bundle, "primserve"), f"--port={port}", f"--metrics_port={mport}",
                           "--enable_echo", "--batch_timeout_micros=200", "--max_batch_size=256",
                           "--batch_threads=8"], env=env, stdout=open(f"{out}/server.log", "w"),
                          stderr=subprocess.STDOUT)
for _ in range(50):
    if subprocess.run([os.path.join(bundle, "primctl"), f"--address=localhost:{port}", "health"], env=env,
                      capture_output=True).returncode == 0:
        break
    time.sleep(0.2)

def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

def metrics():
    text = urllib.request.urlopen(f"http://localhost:{mport}/metrics").read().decode()
    values = {}
    for line in text.splitlines():
        m = re.match(r'(primserve_(?:request_duration_seconds|batch_size_requests)_(?:sum|count))\{?(.*?)\}? (\S+)$', line)
        if m:
            values[(m.group(1), m.group(2))] = float(m.group(3))
    return values

print(open("/proc/cpuinfo").read().count("processor"), "cpus")
for name, extra in [("unary_scan", ["--mode=primitive"]), ("echo", ["--mode=echo"]),
                    ("multiplex_scan", ["--multiplex"])]:
    before_m, before_cpu, t0 = metrics(), cpu_seconds(server.pid), time.time()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([os.path.join(bundle, "primload"), f"--address=localhost:{port}", "--rpc=scan",
                             "--n=1024", "--concurrency=256", "--channels=4", "--warmup_seconds=0",
                             "--measure_seconds=4"] + extra, env=env, capture_output=True, text=True)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, after_cpu, after_m = time.time() - t0, cpu_seconds(server.pid), metrics()
    open(f"{out}/{name}.txt", "w").write(result.stdout + result.stderr)
    rows = [l for l in result.stdout.splitlines() if re.match(r"^(scan|echo)", l)]
    print(f"== {name}: {rows[-1] if rows else result.stdout[-300:]}")
    client_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    print(f"  server CPU {(after_cpu - before_cpu) / wall:.2f} cores, primload CPU {client_cpu / wall:.2f} cores over {wall:.1f} s")
    stages = {}
    for (metric, labels), v in after_m.items():
        if 'rpc="Scan"' not in labels and metric.startswith("primserve_request"):
            continue
        stages[(metric, labels)] = v - before_m.get((metric, labels), 0)
    for stage in ("queue", "h2d", "kernel", "d2h", "total"):
        key = f'rpc="Scan",stage="{stage}"'
        c = stages.get(("primserve_request_duration_seconds_count", key), 0)
        s = stages.get(("primserve_request_duration_seconds_sum", key), 0)
        if c:
            print(f"  Scan {stage}: mean {1e6 * s / c:.1f} us over {int(c)}")
    c = sum(v for (m, l), v in stages.items() if m == "primserve_batch_size_requests_count")
    s = sum(v for (m, l), v in stages.items() if m == "primserve_batch_size_requests_sum")
    if c:
        print(f"  batches {int(c)}, mean {s / c:.1f} requests per batch")
server.terminate()
server.wait()
