// Zstandard (RFC 8878; Debian: libzstd-dev, Homebrew: zstd), for the `dcz` content coding of
// Compression Dictionary Transport (RFC 9842 §5): compressed by the proxy with a raw dictionary
// as a prefix, decoded by HTTPClient for apps. Through CacheZstd only.
#include <zstd.h>
