#include "executor/cuda/nvml.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace ucplan::cuda {
namespace {

// NVML's C ABI, declared here: the toolkit has no nvml.h, and only these few calls are needed.
using Ret = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using Dev = void*;
struct Memory {
  unsigned long long total, free, used;
};
constexpr int kClockSm = 1, kClockMem = 2;  // nvmlClockType_t
constexpr int kTemperatureGpu = 0;          // nvmlTemperatureSensors_t

class Library {
 public:
  explicit Library(const char* name) : h_(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (h_) dlclose(h_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  explicit operator bool() const { return h_ != nullptr; }
  template <typename F>
  F* fn(const char* name) const {
    return reinterpret_cast<F*>(dlsym(h_, name));
  }

 private:
  void* h_;
};

}  // namespace

NvmlFacts nvml_facts(const std::string& pci_bus_id, const char* library) {
  NvmlFacts f;
  Library lib(library);
  if (!lib) {
    const char* e = dlerror();
    f.why = fmt::format("cannot load {}: {}", library, e ? e : "not found");
    return f;
  }
  auto init = lib.fn<Ret()>("nvmlInit_v2");
  auto shutdown = lib.fn<Ret()>("nvmlShutdown");
  auto error_string = lib.fn<const char*(Ret)>("nvmlErrorString");
  auto by_bus = lib.fn<Ret(const char*, Dev*)>("nvmlDeviceGetHandleByPciBusId_v2");
  if (!init || !shutdown || !by_bus) {
    f.why = fmt::format("{} lacks nvmlInit_v2, nvmlShutdown or nvmlDeviceGetHandleByPciBusId_v2", library);
    return f;
  }
  auto text = [&](Ret r) { return error_string ? std::string(error_string(r)) : fmt::format("NVML error {}", r); };
  if (Ret r = init(); r != 0) {
    f.why = "nvmlInit: " + text(r);
    return f;
  }
  Dev dev = nullptr;
  if (Ret r = by_bus(pci_bus_id.c_str(), &dev); r != 0) {
    f.why = fmt::format("nvmlDeviceGetHandleByPciBusId({}): {}", pci_bus_id, text(r));
    shutdown();
    return f;
  }
  f.available = true;
  // Each query runs before its value is formatted (an argument list would not order them).
  auto put = [&](const char* key, bool ok, auto format) { f.values[key] = ok ? format() : "n/a"; };
  char buf[96] = {0};
  auto driver = lib.fn<Ret(char*, unsigned)>("nvmlSystemGetDriverVersion");
  bool ok = driver && driver(buf, sizeof(buf)) == 0;
  put("driver_version", ok, [&] { return std::string(buf); });
  auto uuid = lib.fn<Ret(Dev, char*, unsigned)>("nvmlDeviceGetUUID");
  ok = uuid && uuid(dev, buf, sizeof(buf)) == 0;
  put("gpu_uuid", ok, [&] { return std::string(buf); });
  unsigned v = 0;
  auto number = [&] { return std::to_string(v); };
  auto watts = [&] { return fmt::format("{:.0f}", v / 1000.0); };
  auto clock = lib.fn<Ret(Dev, int, unsigned*)>("nvmlDeviceGetClockInfo");
  auto max_clock = lib.fn<Ret(Dev, int, unsigned*)>("nvmlDeviceGetMaxClockInfo");
  ok = clock && clock(dev, kClockSm, &v) == 0;
  put("sm_clock_mhz", ok, number);
  ok = max_clock && max_clock(dev, kClockSm, &v) == 0;
  put("sm_clock_max_mhz", ok, number);
  ok = clock && clock(dev, kClockMem, &v) == 0;
  put("mem_clock_mhz", ok, number);
  auto power_limit = lib.fn<Ret(Dev, unsigned*)>("nvmlDeviceGetEnforcedPowerLimit");
  ok = power_limit && power_limit(dev, &v) == 0;
  put("power_limit_w", ok, watts);
  auto power = lib.fn<Ret(Dev, unsigned*)>("nvmlDeviceGetPowerUsage");
  ok = power && power(dev, &v) == 0;
  put("power_draw_w", ok, watts);
  auto temperature = lib.fn<Ret(Dev, int, unsigned*)>("nvmlDeviceGetTemperature");
  ok = temperature && temperature(dev, kTemperatureGpu, &v) == 0;
  put("temperature_c", ok, number);
  int ecc_current = 0, ecc_pending = 0;
  auto ecc = lib.fn<Ret(Dev, int*, int*)>("nvmlDeviceGetEccMode");
  ok = ecc && ecc(dev, &ecc_current, &ecc_pending) == 0;
  put("ecc", ok, [&] { return std::string(ecc_current ? "on" : "off"); });
  unsigned mig_current = 0, mig_pending = 0;
  auto mig = lib.fn<Ret(Dev, unsigned*, unsigned*)>("nvmlDeviceGetMigMode");
  ok = mig && mig(dev, &mig_current, &mig_pending) == 0;
  put("mig", ok, [&] { return std::string(mig_current ? "on" : "off"); });
  unsigned long long reasons = 0;
  auto events = lib.fn<Ret(Dev, unsigned long long*)>("nvmlDeviceGetCurrentClocksEventReasons");
  if (!events) events = lib.fn<Ret(Dev, unsigned long long*)>("nvmlDeviceGetCurrentClocksThrottleReasons");
  ok = events && events(dev, &reasons) == 0;
  put("clock_event_reasons", ok, [&] { return fmt::format("0x{:x}", reasons); });
  Memory m{};
  auto memory = lib.fn<Ret(Dev, Memory*)>("nvmlDeviceGetMemoryInfo");
  if (memory && memory(dev, &m) == 0) {
    f.memory_used_bytes = static_cast<std::int64_t>(m.used);
    f.memory_total_bytes = static_cast<std::int64_t>(m.total);
  }
  shutdown();
  return f;
}

}  // namespace ucplan::cuda
