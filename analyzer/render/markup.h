// Text inside HTML and XML documents (the HTML report, the JUnit XML of
// `cuxfer check`): one escaping for both, valid as element text and as a
// double- or single-quoted attribute value.
#pragma once

#include <string>
#include <string_view>

namespace cuxfer::render {

// & < > " ' as entities (&#39; for the apostrophe: XML 1.0 and HTML both
// read it, HTML 4 lacks &apos;). C0 control characters other than tab and
// the newlines become '?': XML 1.0 forbids them even as references, and a
// name from a trace may hold any byte.
std::string markup_escaped(std::string_view s);

}  // namespace cuxfer::render
