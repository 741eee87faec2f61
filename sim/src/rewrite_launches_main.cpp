// graphstep_rewrite_launches [--header] [-I <dir>]... [--root <dir>]... [--depfile <file>]
//                            [--line-base <dir>] <in> <out>:
// the build step that lets a CUDA source run on the simulated device (see
// sim/src/detail/launch_rewriter.hpp): graphstep_cuda_sim_sources runs it for CMake projects,
// and a Makefile runs it itself (docs/install.md). With --header, <in> is a header of the project
// and <out> its copy in the mirrored include folder.
// No absolute path of <in> goes into <out> where it can be avoided, so that a compiler cache
// finds the compilations of another checkout of the same sources: #line names <in> relative to
// --line-base (the folder the compiler runs in; absolute without it), and a mirrored header
// includes its original by a path relative to the mirror's folder.
// The headers <in> includes, found beside the file that includes them or in the -I folders,
// are read for the macros that declare kernels (`#define KERNEL __global__ void`); --depfile
// names them all, for the build to run the step again when one changes. <out> is written only
// when its text changes, so that what includes it is not rebuilt for nothing.
// With --root, the folders whose headers the build rewrites (mirrors): a header read outside all
// of them that holds kernels or launches would reach the compiler as CUDA, and fail with errors
// that do not say why; it is refused here, by name, with the folder to add.

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "detail/launch_rewriter.hpp"

namespace {

namespace fs = std::filesystem;
using graphstep::sim::detail::macro_definition;

std::optional<std::string> read(fs::path const& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) return std::nullopt;
  return std::string{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

// The object-like macros of the headers `source` includes, transitively: quoted ones beside the
// including file first, then in `include_dirs`; headers elsewhere (the toolkit, the system) are
// not read. `read_files` gets every header read, `includers` the file that included each.
std::vector<macro_definition> included_macros(std::string const& source, fs::path const& file,
                                              std::vector<fs::path> const& include_dirs,
                                              std::set<fs::path>& read_files,
                                              std::map<fs::path, fs::path>& includers) {
  std::vector<macro_definition> macros;
  std::deque<std::pair<fs::path, std::string>> pending{{file, source}};
  read_files.insert(fs::weakly_canonical(file));
  while (!pending.empty()) {
    auto const [path, text] = pending.front();
    pending.pop_front();
    graphstep::sim::detail::source_directives directives;
    try {
      directives = graphstep::sim::detail::directives_of(text, path.string());
    } catch (graphstep::sim::detail::rewrite_error const&) {
      continue;  // not C++ this step can read; the compiler will say what is wrong
    }
    if (path != file) {
      macros.insert(macros.end(), directives.macros.begin(), directives.macros.end());
    }
    for (auto const& include : directives.includes) {
      std::vector<fs::path> candidates;
      if (include.quoted) candidates.push_back(path.parent_path() / include.name);
      for (fs::path const& dir : include_dirs) candidates.push_back(dir / include.name);
      for (fs::path const& candidate : candidates) {
        std::error_code error;
        if (!fs::is_regular_file(candidate, error)) continue;
        fs::path const canonical = fs::weakly_canonical(candidate, error);
        if (read_files.insert(canonical).second) {
          includers.emplace(canonical, path);
          if (auto included = read(candidate)) {
            pending.emplace_back(candidate, std::move(*included));
          }
        }
        break;
      }
    }
  }
  return macros;
}

// Whether `path` (canonical) lies in one of `roots` (canonical).
bool inside_any(fs::path const& path, std::vector<fs::path> const& roots) {
  return std::any_of(roots.begin(), roots.end(), [&](fs::path const& root) {
    auto const root_end = std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first;
    return root_end == root.end() ||
           (std::next(root_end) == root.end() && root_end->empty());  // a root ending in '/'
  });
}

// The headers among `read_files` outside every root that hold device code: the rewritten
// source would include them as they are, and the compiler would see CUDA syntax. One line
// each, naming the header and what included it.
std::string unrewritten_device_headers(std::set<fs::path> const& read_files,
                                       std::map<fs::path, fs::path> const& includers,
                                       std::vector<fs::path> const& roots,
                                       std::vector<std::string> const& macro_names) {
  std::string found;
  for (fs::path const& header : read_files) {
    auto const includer = includers.find(header);
    if (includer == includers.end() || inside_any(header, roots)) continue;  // the input itself
    std::optional<std::string> const text = read(header);
    bool device_code = false;
    try {
      device_code =
          text && graphstep::sim::detail::holds_device_code(*text, header.string(), macro_names);
    } catch (graphstep::sim::detail::rewrite_error const&) {
      device_code = true;  // it names device code, and could not be rewritten either
    }
    if (device_code) {
      found += "  " + header.string() + " (included by " + includer->second.string() + ")\n";
    }
  }
  return found;
}

// A Makefile rule, as Ninja and Make read depfiles: spaces in paths escaped.
std::string dependency_rule(std::string const& output, std::set<fs::path> const& inputs) {
  auto escaped = [](std::string const& path) {
    std::string out;
    for (char const c : path) {
      if (c == ' ' || c == '#') out += '\\';
      if (c == '$') out += '$';
      out += c;
    }
    return out;
  };
  std::string rule = escaped(output) + ":";
  for (fs::path const& input : inputs) rule += " \\\n  " + escaped(input.string());
  return rule + "\n";
}

bool write_if_changed(std::string const& path, std::string const& text) {
  if (read(path) == text) return true;
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out << text;
  return static_cast<bool>(out);
}

// `path` relative to the folder `base` (both made absolute), with forward slashes; `path` as it
// is when no relative path leads there (another root).
std::string relative_if_possible(std::string const& path, std::string const& base) {
  fs::path const relative = fs::absolute(path).lexically_normal().lexically_relative(
      fs::absolute(base).lexically_normal());
  return relative.empty() ? path : relative.generic_string();
}

constexpr char const* usage =
    "usage: graphstep_rewrite_launches [--header] [-I <dir>]... [--root <dir>]...\n"
    "                                  [--depfile <file>] [--line-base <dir>] <in.cu> <out.cpp>\n"
    "Rewrites the kernel launches of a CUDA source for graphstep's simulated device; compile\n"
    "<out.cpp> as C++ with the flags of `pkg-config --cflags graphstep-cuda-sim`.\n"
    "  --header           <in> is a header with kernels: <out> is its copy in a folder that\n"
    "                     comes first on the include path\n"
    "  -I <dir>           where the headers <in> includes are, for the macros that declare\n"
    "                     kernels (the folder of <in> is searched first)\n"
    "  --root <dir>       a folder whose headers the build rewrites too: a header <in>\n"
    "                     includes that holds kernels or launches and lies outside every\n"
    "                     --root is refused (without --root, none is checked)\n"
    "  --depfile <file>   write a Makefile rule naming the headers read\n"
    "  --line-base <dir>  #line names <in> relative to <dir> (the compiler's folder)\n";

// What was wrong with the command line, and the usage; exit status 2.
int usage_error(std::string const& what) {
  static_cast<void>(
      std::fprintf(stderr, "graphstep_rewrite_launches: %s\n%s", what.c_str(), usage));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool header = false;
  std::vector<fs::path> include_dirs;
  std::vector<fs::path> roots;
  std::string depfile;
  std::string line_base;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string_view const argument{argv[i]};
    bool const has_value = i + 1 < argc;
    if (argument == "--help" || argument == "-h") {
      static_cast<void>(std::fputs(usage, stdout));
      return 0;
    }
    if (argument == "--header") {
      header = true;
    } else if (argument == "-I" || argument == "--root" || argument == "--depfile" ||
               argument == "--line-base") {
      if (!has_value) return usage_error(std::string{argument} + " needs a value");
      std::string const value{argv[++i]};
      if (argument == "-I") {
        include_dirs.emplace_back(value);
      } else if (argument == "--root") {
        roots.push_back(fs::weakly_canonical(value));
      } else if (argument == "--depfile") {
        depfile = value;
      } else {
        line_base = value;
      }
    } else if (argument.size() > 2 && argument.substr(0, 2) == "-I") {
      include_dirs.emplace_back(std::string{argument.substr(2)});  // -I<dir>, as compilers take it
    } else if (argument.size() > 1 && argument.front() == '-') {
      return usage_error("unknown option " + std::string{argument});
    } else {
      files.emplace_back(argument);
    }
  }
  if (files.size() != 2) {
    return usage_error("give one input and one output file, not " + std::to_string(files.size()));
  }
  std::string const& input = files[0];
  std::string const& output = files[1];
  std::optional<std::string> const source = read(input);
  if (!source) {
    static_cast<void>(
        std::fprintf(stderr, "graphstep_rewrite_launches: cannot read %s\n", input.c_str()));
    return 1;
  }
  std::set<fs::path> read_files;
  std::map<fs::path, fs::path> includers;
  std::vector<std::string> const macro_names = graphstep::sim::detail::kernel_macros(
      included_macros(*source, input, include_dirs, read_files, includers));
  if (!roots.empty()) {
    std::string const outside =
        unrewritten_device_headers(read_files, includers, roots, macro_names);
    if (!outside.empty()) {
      std::string root_list;
      for (fs::path const& root : roots) root_list += "  " + root.string() + "\n";
      static_cast<void>(std::fprintf(
          stderr,
          "graphstep_rewrite_launches: %s includes headers with kernels or launches that are "
          "outside every folder whose headers are rewritten for the simulated device, so the "
          "compiler would see their CUDA syntax:\n%s"
          "Add the folder that holds them to those rewritten: in CMake, "
          "graphstep_cuda_sim_sources(<target> HEADER_ROOTS <folder>...); on the command line, "
          "--root <folder>. The folders rewritten now are:\n%s",
          input.c_str(), outside.c_str(), root_list.c_str()));
      return 1;
    }
  }
  std::string const line_name = line_base.empty() ? input : relative_if_possible(input, line_base);
  std::string const included_as =
      relative_if_possible(input, fs::absolute(output).parent_path().string());
  std::string rewritten;
  try {
    rewritten = header ? graphstep::sim::detail::rewrite_header(*source, line_name, macro_names,
                                                                included_as)
                       : graphstep::sim::detail::rewrite_launches(*source, line_name, macro_names);
  } catch (graphstep::sim::detail::rewrite_error const& e) {
    static_cast<void>(std::fprintf(stderr, "graphstep_rewrite_launches: %s\n", e.what()));
    return 1;
  }
  if (!write_if_changed(output, rewritten) ||
      (!depfile.empty() && !write_if_changed(depfile, dependency_rule(output, read_files)))) {
    static_cast<void>(std::fprintf(stderr, "graphstep_rewrite_launches: cannot write %s\n",
                                   (depfile.empty() ? output : depfile).c_str()));
    return 1;
  }
  return 0;
}
