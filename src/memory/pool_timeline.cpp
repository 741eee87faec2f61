// graphstep_core: plain C++, includes no CUDA header.
#include <cerrno>
#include <fstream>
#include <graphstep/error.hpp>
#include <graphstep/memory/pool_timeline.hpp>
#include <string>
#include <system_error>
#include <unordered_map>

#include "detail/address_text.hpp"

namespace graphstep::memory {
namespace {

// A JSON string (RFC 8259, section 7): quotes, backslashes and control characters escaped.
void append_string(std::string& out, std::string const& text) {
  out += '"';
  for (char const c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          constexpr char const* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[(static_cast<unsigned char>(c) >> 4) & 0xF];
          out += hex[static_cast<unsigned char>(c) & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_field(std::string& out, char const* key, std::string const& value) {
  out += '"';
  out += key;
  out += "\":";
  out += value;
}

std::string number(std::uint64_t value) {
  return std::to_string(value);
}

std::string optional_number(std::optional<std::uint64_t> const& value) {
  return value ? std::to_string(*value) : "null";
}

std::string boolean(bool value) {
  return value ? "true" : "false";
}

std::string quoted(std::string const& text) {
  std::string out;
  append_string(out, text);
  return out;
}

}  // namespace

std::string pool_timeline::to_json() const {
  std::string out = R"({"format":"graphstep.memory_timeline","version":1,)";
  append_field(out, "pool", number(pool));
  out += ',';
  append_field(out, "backing", quoted(backing));
  out += ',';
  append_field(out, "alignment", number(alignment));
  out += ',';
  append_field(out, "events", number(events));
  out += ',';
  append_field(out, "dropped_allocations", number(dropped_allocations));
  out += ",\n\"segments\":[";
  for (std::size_t i = 0; i < segments.size(); ++i) {
    out += i == 0 ? "\n" : ",\n";
    out += "{\"id\":" + number(i) + ",\"base\":" + quoted(graphstep::detail::hex_text(segments[i].base)) +
           ",\"sizes\":[";
    for (std::size_t j = 0; j < segments[i].sizes.size(); ++j) {
      if (j > 0) out += ',';
      out += "{\"at\":" + number(segments[i].sizes[j].at) +
             ",\"bytes\":" + number(segments[i].sizes[j].bytes) + "}";
    }
    out += "]}";
  }
  out += "],\n\"captures\":[";
  std::unordered_map<std::uint64_t, std::string const*> names;
  for (std::size_t i = 0; i < captures.size(); ++i) {
    timeline_capture const& c = captures[i];
    names[c.graph] = &c.name;
    out += i == 0 ? "\n" : ",\n";
    out += "{\"graph\":" + number(c.graph) + ",\"name\":" + quoted(c.name) +
           ",\"began_at\":" + number(c.began_at) + ",\"ended_at\":" + optional_number(c.ended_at) +
           ",\"committed\":" + boolean(c.committed) +
           ",\"released_at\":" + optional_number(c.released_at) + "}";
  }
  out += "],\n\"allocations\":[";
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    timeline_allocation const& a = allocations[i];
    auto const capture = names.find(a.graph);
    out += i == 0 ? "\n" : ",\n";
    out += "{\"id\":" + number(a.id) + ",\"name\":" + quoted(a.name) +
           ",\"address\":" + quoted(graphstep::detail::hex_text(a.address)) +
           ",\"bytes\":" + number(a.bytes) + ",\"segment\":" + number(a.segment) +
           ",\"offset\":" + number(a.offset) + ",\"graph\":" + number(a.graph) +
           ",\"capture\":" + (capture != names.end() ? quoted(*capture->second) : "null") +
           ",\"allocated_at\":" + number(a.allocated_at) +
           ",\"freed_at\":" + optional_number(a.freed_at) + ",\"planned\":" + boolean(a.planned) +
           ",\"kept_after_graph\":" + boolean(a.kept_after_graph) +
           ",\"before_timeline\":" + boolean(a.before_timeline) + "}";
  }
  out += "]}\n";
  return out;
}

void pool_timeline::write_json(std::string const& path) const {
  std::string const text = to_json();
  std::ofstream file{path, std::ios::binary | std::ios::trunc};
  if (!file) {
    throw error{"pool_timeline::write_json: cannot open '" + path +
                "' for writing: " + std::generic_category().message(errno) +
                "; give a path in a directory that exists and may be written"};
  }
  file << text;
  file.flush();
  if (!file) {
    throw error{"pool_timeline::write_json: writing '" + path + "' failed: " +
                std::generic_category().message(errno)};
  }
}

}  // namespace graphstep::memory
