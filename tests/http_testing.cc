#include "tests/http_testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace primserve::testing {

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& target) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to 127.0.0.1:", port, ": ", std::strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", target, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    raw.append(buffer, static_cast<size_t>(n));
  }
  // "HTTP/1.x 200 OK\r\n<headers>\r\n\r\n<body>"
  const size_t body_start = raw.find("\r\n\r\n");
  HttpResponse response;
  if (raw.size() < 12 || body_start == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(raw).substr(9, 3), &response.status)) {
    return absl::InternalError(absl::StrCat("not an HTTP response: ", raw.substr(0, 200)));
  }
  response.body = raw.substr(body_start + 4);
  return response;
}

std::string UrlEncode(absl::string_view text) {
  std::string encoded;
  for (const char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      encoded += c;
    } else {
      absl::StrAppendFormat(&encoded, "%%%02X", static_cast<unsigned char>(c));
    }
  }
  return encoded;
}

std::optional<double> SampleValue(absl::string_view exposition, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    double value = 0;
    if (absl::ConsumePrefix(&line, series) && absl::ConsumePrefix(&line, " ") &&
        absl::SimpleAtod(line, &value)) {
      return value;
    }
  }
  return std::nullopt;
}

}  // namespace primserve::testing
