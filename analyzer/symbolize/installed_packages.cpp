#include "analyzer/symbolize/installed_packages.h"

#include <dirent.h>

#include <fstream>

namespace cuxfer::symbolize {

namespace {

// pip normalises distribution names: case, and '-' / '.' for '_' (PEP 503, 427).
std::string normalise(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) out.push_back(c == '-' || c == '.' ? '_' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

InstalledPackages::InstalledPackages() : lister_(&InstalledPackages::list_directory) {}

std::set<std::string> InstalledPackages::list_directory(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = opendir(dir.empty() ? "/" : dir.c_str());
  if (!d) return names;
  while (const dirent* e = readdir(d)) {
    const std::string_view entry = e->d_name;
    std::string_view stem;
    if (ends_with(entry, ".dist-info")) stem = entry.substr(0, entry.size() - 10);
    else if (ends_with(entry, ".egg-info")) stem = entry.substr(0, entry.size() - 9);
    else continue;
    // <name>-<version>: the name is up to the first '-' (pip writes '_' inside names).
    const size_t dash = stem.find('-');
    names.insert(normalise(stem.substr(0, dash)));
    // Import names that differ from the distribution's (PyYAML installs yaml).
    std::ifstream top(dir + "/" + std::string(entry) + "/top_level.txt");
    for (std::string line; std::getline(top, line);)
      if (!line.empty()) names.insert(normalise(line));
  }
  closedir(d);
  return names;
}

const std::set<std::string>& InstalledPackages::names_in(const std::string& dir) {
  auto it = cache_.find(dir);
  if (it == cache_.end()) it = cache_.emplace(dir, lister_(dir)).first;
  return it->second;
}

bool InstalledPackages::contains(std::string_view file) {
  if (file.empty() || file.front() != '/') return false;  // <frozen ...>, relative names: not looked up
  // For /a/b/c.py: D=/a/b holds module "c", D=/a holds package "b", D="" holds "a".
  size_t end = file.rfind('/');
  std::string_view child = file.substr(end + 1);
  if (ends_with(child, ".py")) child.remove_suffix(3);
  while (end != std::string_view::npos) {
    const std::string dir(file.substr(0, end));
    if (!child.empty() && names_in(dir).count(normalise(child))) return true;
    if (end == 0) break;
    const size_t up = file.rfind('/', end - 1);
    child = file.substr(up + 1, end - up - 1);
    end = up;
  }
  return false;
}

}  // namespace cuxfer::symbolize
