// The measurement cache of `ucplan profile --cache DIR`: one file per device and library
// versions, entries keyed by signature | op | algorithm | micro-batch, written atomically.
#pragma once

#include <map>
#include <string>

#include "planner/model/profile.h"

namespace ucplan {

class MeasurementCache {
 public:
  // An empty dir disables the cache.
  MeasurementCache(std::string dir, const DeviceInfo& device, const std::string& source);
  bool enabled() const { return !path_.empty(); }
  const OpCost* find(const std::string& key) const;
  void put(const std::string& key, const OpCost& cost);
  // Atomically, over the file's entries as they are then (another profile may have saved since).
  void save() const;
  const std::string& path() const { return path_; }
  int hits() const { return hits_; }

 private:
  std::string path_;
  std::map<std::string, OpCost> entries_;
  mutable int hits_ = 0;
};

}  // namespace ucplan
