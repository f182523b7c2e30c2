// libnghttp2 (Debian's libnghttp2-dev, Homebrew's libnghttp2): the HTTP/2 framing, HPACK and
// flow control under the proxy's HTTP/2 server, and the tests' HTTP/2 client. No logic lives
// in this file.
#ifndef CNGHTTP2_HTTPCACHE_SHIM_H
#define CNGHTTP2_HTTPCACHE_SHIM_H

#include <nghttp2/nghttp2.h>

#endif
