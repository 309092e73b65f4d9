// stream_floor_bench: what the edge stream's contract makes every byte of command output cost
// in CPU, whatever the implementation (issue 14, target 1) — each piece measured alone in
// this process, as CPU-seconds per GiB, beside a plain memcpy of the same bytes:
//
//   - the envelope of each CommandProgress (wire.md: the inner is command_id ||
//     SHA-256(det(Chunk)), Ed25519-signed): SHA-256 alone (the floor of it), then
//     EnvelopeCodec::SealEvent on the agent and VerifyEvent on the controller as implemented;
//   - TLS record protection on the node's mTLS link (the agent writes, the controller reads):
//     OpenSSL's default TLS 1.3 suite over a memory BIO pair, 16 KiB records, as gRPC's TSI;
//   - the kernel's share of each hop, sender and receiver measured on their own threads: a
//     pipe (the command's stdout into the agent), loopback TCP (agent → controller), a unix
//     socket (controller → the operator CLI on the admin socket).
//
// It then sums them per process — agent: pipe read + seal + TLS write + TCP send;
// controller: TCP receive + TLS read + verify + unix send; CLI: unix receive — and in all:
// the floor below which no implementation of the contract goes on this machine, with none of
// gRPC's framing, protobuf copies or scheduling counted. With `--ssh-mibs X` (ssh's rate from
// edge_vs_ssh.sh) it prints the budget of target 1: 2x ssh on `--cores` cores leaves
// cores / (2 X) CPU-seconds per GiB for all three processes.
//
// Usage: stream_floor_bench [--mib M] [--chunk-kib K] [--runs R] [--ssh-mibs X]
//                           [--cores C] [--json PATH]
// Prints figures; asserts nothing (design.md §8).
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent/identity/encoding.h"
#include "agent/identity/envelope_codec.h"
#include "agent/identity/node_key.h"
#include "common/clock.h"
#include "node_cluster.pb.h"
#include "tests/bench/bench_os.h"
#include "tests/bench/bench_report.h"

namespace {

namespace pb = aegis::cluster::v1;
using edge::identity::EnvelopeCodec;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double ThreadCpuSeconds() {
  return edge::bench::CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "stream_floor_bench: %s\n", what.c_str());
  std::exit(1);
}

// CPU-seconds per GiB of `step` run over `total` bytes in `chunk`-sized steps, on this thread.
double PerGiB(size_t total, size_t chunk, const std::function<void()>& step) {
  const double t0 = ThreadCpuSeconds();
  for (size_t done = 0; done < total; done += chunk)
    step();
  return (ThreadCpuSeconds() - t0) * kGiB / static_cast<double>(total);
}

// One hop through the kernel: `total` bytes written to `out` in `chunk`-sized writes by one
// thread and read from `in` by another; each side's CPU-seconds per GiB (its own thread's
// time, kernel included).
std::pair<double, double> Hop(int out, int in, size_t total, size_t chunk) {
  double send = 0, recv = 0;
  std::thread reader([&] {
    std::vector<char> buf(chunk);
    const double t0 = ThreadCpuSeconds();
    size_t got = 0;
    while (got < total) {
      const ssize_t n = ::read(in, buf.data(), buf.size());
      if (n <= 0) Die("hop read failed: " + std::string(std::strerror(errno)));
      got += static_cast<size_t>(n);
    }
    recv = (ThreadCpuSeconds() - t0) * kGiB / static_cast<double>(total);
  });
  std::vector<char> buf(chunk, 'x');
  const double t0 = ThreadCpuSeconds();
  for (size_t sent = 0; sent < total;) {
    size_t off = 0;
    while (off < chunk) {
      const ssize_t n = ::write(out, buf.data() + off, chunk - off);
      if (n <= 0) Die("hop write failed: " + std::string(std::strerror(errno)));
      off += static_cast<size_t>(n);
    }
    sent += chunk;
  }
  send = (ThreadCpuSeconds() - t0) * kGiB / static_cast<double>(total);
  reader.join();
  return {send, recv};
}

std::pair<double, double> PipeHop(size_t total, size_t chunk) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) Die("pipe");
  // As the agent's runner: the pipe at its largest default size.
  ::fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
  auto r = Hop(fds[1], fds[0], total, chunk);
  ::close(fds[0]);
  ::close(fds[1]);
  return r;
}

std::pair<double, double> UnixHop(size_t total, size_t chunk) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) Die("socketpair");
  auto r = Hop(sv[0], sv[1], total, chunk);
  ::close(sv[0]);
  ::close(sv[1]);
  return r;
}

std::pair<double, double> TcpHop(size_t total, size_t chunk) {
  const auto [sfd, cfd] = edge::bench::LoopbackTcpPair();
  if (sfd < 0) Die("loopback TCP pair");
  auto r = Hop(cfd, sfd, total, chunk);
  ::close(cfd);
  ::close(sfd);
  return r;
}

// A TLS 1.3 session between two SSL objects over a memory BIO pair: the client is the agent
// (it writes), the server the controller (it reads). A throwaway P-256 certificate.
class TlsPair {
 public:
  explicit TlsPair(size_t chunk) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    if (!key || !cert) Die("key or certificate");
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("bench"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    if (X509_sign(cert, key, EVP_sha256()) == 0) Die("certificate signing");
    sctx_ = SSL_CTX_new(TLS_server_method());
    cctx_ = SSL_CTX_new(TLS_client_method());
    if (!sctx_ || !cctx_ || SSL_CTX_use_certificate(sctx_, cert) != 1 ||
        SSL_CTX_use_PrivateKey(sctx_, key) != 1) {
      Die("TLS contexts");
    }
    SSL_CTX_set_verify(cctx_, SSL_VERIFY_NONE, nullptr);
    X509_free(cert);
    EVP_PKEY_free(key);
    server_ = SSL_new(sctx_);
    client_ = SSL_new(cctx_);
    BIO* cb = nullptr;
    BIO* sb = nullptr;
    // Room for a whole chunk's records in flight.
    if (BIO_new_bio_pair(&cb, 2 * chunk + 65536, &sb, 2 * chunk + 65536) != 1) Die("BIO pair");
    SSL_set_bio(client_, cb, cb);
    SSL_set_bio(server_, sb, sb);
    SSL_set_connect_state(client_);
    SSL_set_accept_state(server_);
    for (int i = 0; i < 100 && !(SSL_is_init_finished(client_) && SSL_is_init_finished(server_));
         ++i) {
      SSL_do_handshake(client_);
      SSL_do_handshake(server_);
    }
    if (!SSL_is_init_finished(client_) || !SSL_is_init_finished(server_)) Die("TLS handshake");
  }
  ~TlsPair() {
    SSL_free(client_);
    SSL_free(server_);
    SSL_CTX_free(cctx_);
    SSL_CTX_free(sctx_);
  }
  TlsPair(const TlsPair&) = delete;
  TlsPair& operator=(const TlsPair&) = delete;

  std::string Suite() const { return SSL_CIPHER_get_name(SSL_get_current_cipher(client_)); }
  void Write(const std::string& chunk) {
    if (SSL_write(client_, chunk.data(), static_cast<int>(chunk.size())) !=
        static_cast<int>(chunk.size())) {
      Die("SSL_write");
    }
  }
  void Read(std::string& buf) {
    size_t got = 0;
    while (got < buf.size()) {
      const int n = SSL_read(server_, buf.data() + got, static_cast<int>(buf.size() - got));
      if (n <= 0) Die("SSL_read");
      got += static_cast<size_t>(n);
    }
  }

 private:
  SSL_CTX* sctx_ = nullptr;
  SSL_CTX* cctx_ = nullptr;
  SSL* client_ = nullptr;
  SSL* server_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  size_t chunk_kib = 256;
  int runs = 5;
  double ssh_mibs = 0;
  double cores = 2;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mib") mib = static_cast<size_t>(std::atol(argv[i + 1]));
    if (flag == "--chunk-kib") chunk_kib = static_cast<size_t>(std::atol(argv[i + 1]));
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    if (flag == "--ssh-mibs") ssh_mibs = std::atof(argv[i + 1]);
    if (flag == "--cores") cores = std::atof(argv[i + 1]);
    if (flag == "--json") json_path = argv[i + 1];
  }
  if (mib < 1 || chunk_kib < 1 || runs < 1 || ssh_mibs < 0 || cores <= 0) {
    std::fprintf(stderr,
                 "usage: stream_floor_bench [--mib M>0] [--chunk-kib K>0] [--runs R>0] "
                 "[--ssh-mibs X] [--cores C>0] [--json PATH]\n");
    return 2;
  }
  const size_t chunk = chunk_kib << 10;
  const size_t total = (mib << 20) / chunk * chunk;

  // One CommandProgress as the agent sends it: a stdout chunk of `chunk` bytes.
  auto key = edge::identity::NodeKey::Generate();
  if (!key) Die("node key: " + key.error().ToString());
  const std::string node = "edge-01";
  const std::string stream = "6f1c1c1e-0000-4000-8000-0000000000d1";
  const std::string token = std::string(600, 't');  // a node token's size
  const std::vector<std::string> keys = {key->public_key()};
  pb::EdgeEvent event;
  event.mutable_command_progress()->set_command_id("3b0f9a52-5d1e-4c57-9a61-1f1e0c8b2a77");
  event.mutable_command_progress()->mutable_chunk()->set_stdout(std::string(chunk, 'x'));
  const std::string& bytes = event.command_progress().chunk().stdout();
  std::string copy(chunk, '\0');
  edge::SystemClock clock;
  TlsPair tls(chunk);
  std::string tls_in(chunk, '\0');

  std::map<std::string, std::vector<double>> s;
  for (int r = 0; r < runs; ++r) {
    s["memcpy"].push_back(PerGiB(total, chunk, [&] {
      std::memcpy(copy.data(), bytes.data(), chunk);
      __asm__ volatile("" : : "r"(copy.data()) : "memory");
    }));
    s["sha256"].push_back(PerGiB(total, chunk, [&] {
      const std::string d = edge::identity::Sha256(bytes);
      __asm__ volatile("" : : "r"(d.data()) : "memory");
    }));
    s["seal"].push_back(PerGiB(total, chunk, [&] {
      if (!EnvelopeCodec::SealEvent(event, *key, token, clock.Now(), node, stream)) {
        Die("SealEvent");
      }
    }));
    s["verify"].push_back(PerGiB(total, chunk, [&] {
      if (!EnvelopeCodec::VerifyEvent(event, node, stream, keys, clock.Now())) {
        Die("VerifyEvent");
      }
    }));
    // TLS: the writer's and the reader's time, each measured around its own calls.
    double w = 0, rd = 0;
    for (size_t done = 0; done < total; done += chunk) {
      double t0 = ThreadCpuSeconds();
      tls.Write(bytes);
      w += ThreadCpuSeconds() - t0;
      t0 = ThreadCpuSeconds();
      tls.Read(tls_in);
      rd += ThreadCpuSeconds() - t0;
    }
    s["tls_write"].push_back(w * kGiB / static_cast<double>(total));
    s["tls_read"].push_back(rd * kGiB / static_cast<double>(total));
    auto [ps, pr] = PipeHop(total, chunk);
    s["pipe_send"].push_back(ps);
    s["pipe_recv"].push_back(pr);
    auto [ts, tr] = TcpHop(total, chunk);
    s["tcp_send"].push_back(ts);
    s["tcp_recv"].push_back(tr);
    auto [us, ur] = UnixHop(total, chunk);
    s["unix_send"].push_back(us);
    s["unix_recv"].push_back(ur);
    // The sums, per run.
    s["agent"].push_back(pr + s["seal"].back() + w * kGiB / static_cast<double>(total) + ts);
    s["controller"].push_back(tr + rd * kGiB / static_cast<double>(total) + s["verify"].back() +
                              us);
    s["cli"].push_back(ur);
    s["all"].push_back(s["agent"].back() + s["controller"].back() + ur);
  }

  std::printf(
      "stream_floor_bench: %zu MiB in %zu KiB chunks, %d runs; TLS suite %s; CPU-seconds per "
      "GiB (lower is better)\n",
      total >> 20, chunk_kib, runs, tls.Suite().c_str());
  edge::bench::BenchReport report;
  report.Add("memcpy of the chunk (reference)", "s/GiB", s["memcpy"]);
  report.Add("SHA-256 of the chunk (the envelope's floor)", "s/GiB", s["sha256"],
             "memcpy of the chunk (reference)");
  report.Add("agent: SealEvent (SHA-256 + Ed25519 sign)", "s/GiB", s["seal"],
             "SHA-256 of the chunk (the envelope's floor)");
  report.Add("controller: VerifyEvent (SHA-256 + Ed25519 verify)", "s/GiB", s["verify"],
             "SHA-256 of the chunk (the envelope's floor)");
  report.Add("agent: TLS write (" + tls.Suite() + ")", "s/GiB", s["tls_write"]);
  report.Add("controller: TLS read", "s/GiB", s["tls_read"]);
  report.Add("pipe: command writes", "s/GiB", s["pipe_send"]);
  report.Add("pipe: agent reads", "s/GiB", s["pipe_recv"]);
  report.Add("loopback TCP: agent sends", "s/GiB", s["tcp_send"]);
  report.Add("loopback TCP: controller receives", "s/GiB", s["tcp_recv"]);
  report.Add("unix socket: controller sends", "s/GiB", s["unix_send"]);
  report.Add("unix socket: CLI receives", "s/GiB", s["unix_recv"]);
  report.Add("floor: agent", "s/GiB", s["agent"]);
  report.Add("floor: controller", "s/GiB", s["controller"]);
  report.Add("floor: CLI", "s/GiB", s["cli"]);
  const auto& all = report.Add("floor: all three", "s/GiB", s["all"]);
  std::printf("  at most %.0f MiB/s on %.0f cores if every core did nothing else\n",
              cores * 1024.0 / all.median, cores);
  if (ssh_mibs > 0) {
    const double budget = cores * 1024.0 / (2.0 * ssh_mibs);
    std::printf(
        "  target 1 (2x ssh's %.0f MiB/s on %.0f cores) leaves %.2f CPU-s per GiB for all three: "
        "the floor is %.2fx that\n",
        ssh_mibs, cores, budget, all.median / budget);
  }
  return report.Write(json_path) ? 0 : 1;
}
