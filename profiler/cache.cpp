#include "cache.h"

#include <filesystem>

#include <fmt/format.h>

#include "planner/model/errors.h"
#include "planner/model/json_util.h"
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
  for (const auto& e : r.at("entries").array()) {
    OpCost c;
    const std::string op = e.at("op").string();
    if (!parse_step_op(op, &c.op)) e.at("op").fail(fmt::format("unknown op \"{}\"", op));
    c.algo = e.at("algo").string();
    c.batch = e.at("batch").integer(0, INT64_MAX);
    c.status = e.at("status").string();
    c.seconds = e.number_or("seconds", 0);
    c.spread = e.number_or("spread", 0);
    c.workspace_bytes = e.integer_or("workspace_bytes", 0, 0, INT64_MAX);
    entries_[e.at("key").string()] = c;
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
