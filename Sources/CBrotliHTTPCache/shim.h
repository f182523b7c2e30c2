// Brotli's decoder (RFC 7932; Debian: libbrotli-dev, Homebrew: brotli), for the `br` content
// coding HTTPClient decodes for apps. Only the decoder: nothing here compresses.
#include <brotli/decode.h>
