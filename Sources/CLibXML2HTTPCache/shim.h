// libxml2's HTML parser (htmlReadMemory, the tree it builds), for OfflinePages: which
// subresources a page needs. Debian: libxml2-dev; part of Apple's SDKs.
#ifndef CLIBXML2_HTTPCACHE_SHIM_H
#define CLIBXML2_HTTPCACHE_SHIM_H

#include <libxml/xmlversion.h>
// Debian builds libxml2 with ICU, and <libxml/encoding.h> then includes ICU's headers, which
// clash with the ICU that Foundation bundles on Linux. Only xmlCharEncodingHandler's layout
// depends on it, and Swift never touches that struct: libxml2 converts encodings itself.
#undef LIBXML_ICU_ENABLED
#include <libxml/HTMLparser.h>
#include <libxml/HTMLtree.h>
#include <libxml/tree.h>

#endif
