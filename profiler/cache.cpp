#include "cache.h"

#include <filesystem>

#include <fmt/format.h>

#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/network.h"
#include "planner/model/sha256.h"

namespace ucplan {

namespace {

// A cache file's entries, each checked as a profile's cost is (a cached value goes into one) and
// saying what its key names: the op, algorithm and micro-batch after the signature, then r and the
// repeat count.
std::map<std::string, OpCost> read_entries(const std::string& path) {
  std::map<std::string, OpCost> entries;
  Json j = load_json_file(path);
  JsonReader r(j, path, "");
  if (r.at("format").string() != "ucplan-cache/1") r.at("format").fail("expected \"ucplan-cache/1\"");
  for (const auto& e : r.at("entries").array()) {
    e.allow_only({"key", "op", "algo", "batch", "status", "seconds", "spread", "workspace_bytes"});
    const OpCost c = read_op_cost(e, kMaxBatch);
    const std::string key = e.at("key").string();
    const std::string names = fmt::format("|{}|{}|{}|r", step_op_name(c.op), c.algo, c.batch);
    const auto at = key.rfind(names);
    if (at == std::string::npos || at == 0 || key.find('|', at + names.size()) != std::string::npos)
      e.at("key").fail(fmt::format("names another measurement than the entry's (\"{}\" expected after its signature)",
                                   names.substr(1)));
    // Out of memory and a runner's failures depend on what held the device then: not kept
    // (profile_network.cpp), and dropped from a file that holds them.
    if (c.status == "out_of_memory" ||
        (c.status.rfind("failed: ", 0) == 0 && c.status.find(" s a profile holds") == std::string::npos))
      continue;
    entries[key] = c;
  }
  return entries;
}

}  // namespace

MeasurementCache::MeasurementCache(std::string dir, const DeviceInfo& device, const std::string& source) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir, ec)) throw UserError(dir, "--cache", "cannot create the cache folder");
  std::string identity = source + "|" + device.kind + "|" + device.name;
  for (const auto& [k, v] : device.versions) identity += "|" + k + "=" + v;
  path_ = dir + "/" + sha256_hex(identity).substr(0, 16) + ".json";
  if (!std::filesystem::exists(path_, ec)) return;
  entries_ = read_entries(path_);
}

const OpCost* MeasurementCache::find(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  ++hits_;
  return &it->second;
}

void MeasurementCache::put(const std::string& key, const OpCost& cost) { entries_[key] = cost; }

void MeasurementCache::save() const {
  if (path_.empty()) return;
  // What another profile sharing the folder saved since this one read the file is kept: the
  // file's entries now, then this profile's over them (the last to save no longer drops the
  // others' measurements). A file that no longer reads is replaced.
  std::map<std::string, OpCost> merged;
  std::error_code ec;
  if (std::filesystem::exists(path_, ec)) {
    try {
      merged = read_entries(path_);
    } catch (const UserError&) {
      merged.clear();
    }
  }
  for (const auto& [k, c] : entries_) merged[k] = c;
  OrderedJson j;
  j["format"] = "ucplan-cache/1";
  OrderedJson es = OrderedJson::array();
  for (const auto& [k, c] : merged)
    es.push_back({{"key", k},
                  {"op", step_op_name(c.op)},
                  {"algo", c.algo},
                  {"batch", c.batch},
                  {"status", c.status},
                  {"seconds", c.seconds},
                  {"spread", c.spread},
                  {"workspace_bytes", c.workspace_bytes}});
  j["entries"] = std::move(es);
  write_file_atomically(path_, dump_json(j));
}

}  // namespace ucplan
