// SSL_new as the edge-controller executable defines it: OpenSSL's own, plus
// SSL_MODE_RELEASE_BUFFERS on every connection (issue 14, fleet memory).
//
// Why: an idle TLS connection keeps OpenSSL's record buffers (about 33 KiB: one read and one
// write buffer of a full record each) unless the connection has SSL_MODE_RELEASE_BUFFERS,
// which frees them whenever they are empty. gRPC 1.51 creates its connections' SSL objects
// itself and offers no way to set a mode on them; a controller holds one TLS connection per
// node that mostly carries a heartbeat every 30 s, so those buffers were a fifth of its memory
// per node (heaptrack with fleet_bench; figures in docs/performance.md).
//
// How: the executable exports this definition (controller/CMakeLists.txt:
// --export-dynamic-symbol=SSL_new), and the dynamic loader binds every library's call of
// SSL_new — gRPC's (Asio's own SSL engine already sets the mode) — to the executable first;
// this one calls OpenSSL's (libssl.so.3, version OPENSSL_3.0.0) and sets the mode. Should that
// lookup fail (an OpenSSL linked statically, another major version), every TLS connection
// would fail silently: the process says why and aborts at its first one instead. Only the binary
// has it: the libraries and the test binaries that link them keep OpenSSL's SSL_new unchanged. The
// mode changes when memory is held, not what is sent or accepted.
#include <dlfcn.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>

namespace {

using SslNew = SSL* (*)(SSL_CTX*);

SslNew OpenSslNew() {
  void* f = dlvsym(RTLD_NEXT, "SSL_new", "OPENSSL_3.0.0");
  if (f == nullptr) {
    std::fprintf(stderr,
                 "edge-controller: OpenSSL's SSL_new@OPENSSL_3.0.0 not found after the binary's "
                 "own (controller/ssl_release_buffers.cc): %s\n",
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<SslNew>(f);
}

}  // namespace

extern "C" SSL* SSL_new(SSL_CTX* ctx) {
  static const SslNew openssl_ssl_new = OpenSslNew();
  SSL* ssl = openssl_ssl_new(ctx);
  if (ssl != nullptr) SSL_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
  return ssl;
}
