// A stand-in for libnvidia-ml.so.1 with fixed answers, so that cuda::nvml_facts() is tested on
// machines without a driver: one GPU at bus 0000:3B:00.0, an H100-like set of facts, MIG not
// supported (NVML_ERROR_NOT_SUPPORTED = 3).
#include <cstring>

namespace {
int g_initialized = 0;
int g_device = 0;  // its address is the handle
}  // namespace

extern "C" {
int nvmlInit_v2() { return ++g_initialized > 0 ? 0 : 1; }
int nvmlShutdown() { return g_initialized-- > 0 ? 0 : 1; }
const char* nvmlErrorString(int r) { return r == 6 ? "Not Found" : "Unknown Error"; }
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** dev) {
  if (std::strcmp(bus, "0000:3B:00.0") != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *dev = &g_device;
  return 0;
}
int nvmlSystemGetDriverVersion(char* v, unsigned n) {
  std::strncpy(v, "580.159.03", n);
  return 0;
}
int nvmlDeviceGetUUID(void*, char* v, unsigned n) {
  std::strncpy(v, "GPU-12345678-abcd-ef01-2345-6789abcdef01", n);
  return 0;
}
int nvmlDeviceGetClockInfo(void*, int type, unsigned* mhz) {
  *mhz = type == 1 ? 1755 : 2619;
  return 0;
}
int nvmlDeviceGetMaxClockInfo(void*, int type, unsigned* mhz) {
  *mhz = type == 1 ? 1980 : 2619;
  return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* mw) {
  *mw = 700000;
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* mw) {
  *mw = 123456;
  return 0;
}
int nvmlDeviceGetTemperature(void*, int, unsigned* c) {
  *c = 41;
  return 0;
}
int nvmlDeviceGetEccMode(void*, int* current, int* pending) {
  *current = *pending = 1;
  return 0;
}
int nvmlDeviceGetMigMode(void*, unsigned*, unsigned*) { return 3; }
int nvmlDeviceGetCurrentClocksEventReasons(void*, unsigned long long* r) {
  *r = 0x1;  // GPU idle
  return 0;
}
struct Memory {
  unsigned long long total, free, used;
};
int nvmlDeviceGetMemoryInfo(void*, Memory* m) {
  m->total = 85520809984ull;
  m->used = 555745280ull;
  m->free = m->total - m->used;
  return 0;
}
}
