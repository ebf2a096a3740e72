#include "cache.h"

#include <filesystem>

#include <fmt/format.h>

#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/network.h"
#include "planner/model/sha256.h"

namespace ucplan {

MeasurementCache::MeasurementCache(std::string dir, const DeviceInfo& device, const std::string& source) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir, ec)) throw UserError(dir, "--cache", "cannot create the cache folder");
  std::string identity = source + "|" + device.kind + "|" + device.name;
  for (const auto& [k, v] : device.versions) identity += "|" + k + "=" + v;
  path_ = dir + "/" + sha256_hex(identity).substr(0, 16) + ".json";
  if (!std::filesystem::exists(path_, ec)) return;
  Json j = load_json_file(path_);
  JsonReader r(j, path_, "");
  if (r.at("format").string() != "ucplan-cache/1") r.at("format").fail("expected \"ucplan-cache/1\"");
  // Each entry within a profile's bounds (a cached value goes into one) and saying what its key
  // names: the op, algorithm and micro-batch after the signature, then r and the repeat count.
  for (const auto& e : r.at("entries").array()) {
    e.allow_only({"key", "op", "algo", "batch", "status", "seconds", "spread", "workspace_bytes"});
    const OpCost c = read_op_cost(e, kMaxBatch);
    const std::string key = e.at("key").string();
    const std::string names = fmt::format("|{}|{}|{}|r", step_op_name(c.op), c.algo, c.batch);
    const auto at = key.rfind(names);
    if (at == std::string::npos || at == 0 || key.find('|', at + names.size()) != std::string::npos)
      e.at("key").fail(fmt::format("names another measurement than the entry's (\"{}\" expected after its signature)",
                                   names.substr(1)));
    entries_[key] = c;
  }
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
  OrderedJson j;
  j["format"] = "ucplan-cache/1";
  OrderedJson es = OrderedJson::array();
  for (const auto& [k, c] : entries_)
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
