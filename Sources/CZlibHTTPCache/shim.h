// zlib, for the gzip members of WARC files (OfflinePages) and the gzip and deflate content
// codings HTTPClient decodes for apps, both inflated through CacheZlib. Debian: zlib1g-dev; part
// of Apple's SDKs.
#include <zlib.h>

// deflateInit2 and inflateInit2 are macros Swift cannot call.
static inline int httpcache_deflate_init_gzip(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}
// inflateInit2 with the window bits given: 15 + 16 reads a gzip member, 15 + 32 a zlib or a gzip
// header, 15 a zlib stream, -15 raw deflate (zlib.h, inflateInit2). CacheZlib's ZlibInflater calls it.
static inline int httpcache_inflate_init(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}
