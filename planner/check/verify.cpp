#include "verify.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/model/errors.h"
#include "planner/ir/program.h"
#include "planner/model/network.h"
#include "planner/model/sha256.h"
#include "planner/model/units.h"

namespace ucplan {

namespace {

constexpr int kNumStreams = 3;
using Clock = std::array<int, kNumStreams>;

int stream_index(Stream s) { return static_cast<int>(s); }

// Thrown internally to stop at the first error; find_plan_error returns its text.
struct Invalid {
  std::string what;
};
[[noreturn]] void invalid(std::string what) { throw Invalid{std::move(what)}; }

// Every buffer starts on this boundary (what cuDNN and vectorised CPU kernels assume).
constexpr std::int64_t kAlignment = 256;

// a * b + c, or -1 when it does not fit in int64 (every operand is >= 0 here).
std::int64_t checked_muladd(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r)) return -1;
  return r;
}

// Convolution algorithms by device family, as the backends name them (profiler/runner.h). A
// plan uses one family: the CPU's, or cuDNN's (measured CUDA profiles and the analytic models).
const std::set<std::string>& cpu_algorithms() {
  static const std::set<std::string> a = {"direct", "gemm", "gemm_lift"};
  return a;
}
const std::set<std::string>& cuda_algorithms(StepOp op) {
  static const std::map<StepOp, std::set<std::string>> a = {
      {StepOp::Forward,
       {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling", "winograd",
        "winograd_nonfused"}},
      {StepOp::BackwardData, {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"}},
      {StepOp::BackwardFilter, {"algo_0", "algo_1", "fft", "algo_3", "winograd_nonfused", "fft_tiling"}}};
  static const std::set<std::string> none;
  auto it = a.find(op);
  return it == a.end() ? none : it->second;
}

// A name of one of cuDNN's algorithms, for any op.
bool cudnn_algorithm(const std::string& algo) {
  for (StepOp op : {StepOp::Forward, StepOp::BackwardData, StepOp::BackwardFilter})
    if (cuda_algorithms(op).count(algo)) return true;
  return false;
}

// The CPU kernels' contract (executor/cpu/kernels.h), restated here so that the checker does not
// trust the executor's own code: gemm_lift needs stride 1 and more than one tap; the workspace
// every micro-batch of n samples writes, in bytes (-1: too large to represent). A test compares
// these with the kernels' own functions.
bool cpu_conv_supported(const GraphLayer& l, const std::string& algo) {
  const ConvParams& c = l.spec.conv;
  if (algo == "gemm_lift") return c.stride[0] == 1 && c.stride[1] == 1 && c.kernel[0] * c.kernel[1] > 1;
  return cpu_algorithms().count(algo) > 0;
}
std::int64_t cpu_conv_workspace(const GraphLayer& l, const std::string& algo, std::int64_t n) {
  const ConvParams& c = l.spec.conv;
  const std::int64_t cg = l.in_shapes[0].c / c.groups, kg = c.out_channels / c.groups, taps = c.kernel[0] * c.kernel[1];
  auto product = [](std::initializer_list<std::int64_t> xs) {  // -1 on overflow
    std::int64_t r = 1;
    for (std::int64_t x : xs)
      if (__builtin_mul_overflow(r, x, &r)) return std::int64_t{-1};
    return r;
  };
  if (algo == "gemm") {
    const bool identity = taps == 1 && c.stride[0] == 1 && c.stride[1] == 1 && c.pad[0] == 0 && c.pad[1] == 0;
    return identity ? 0 : product({4, n, cg, taps, l.out.h, l.out.w});
  }
  if (algo == "gemm_lift") {
    const std::int64_t lowered_kernel = product({4, kg, taps, cg}),
                       lifted = product({4, n, kg, taps, l.in_shapes[0].h, l.in_shapes[0].w});
    if (lowered_kernel < 0 || lifted < 0) return -1;
    return checked_muladd(lifted, 1, lowered_kernel);
  }
  return 0;
}

}  // namespace

std::string conv_cost_error(const GraphLayer& l, bool cpu, StepOp op, const std::string& algo, std::int64_t batch,
                            std::int64_t workspace_bytes) {
  if (!cpu)
    return cuda_algorithms(op).count(algo)
               ? ""
               : fmt::format("\"{}\" is not a {} algorithm of cuDNN", algo, step_op_name(op));
  if (!cpu_algorithms().count(algo))
    return fmt::format("\"{}\" is not a CPU algorithm (direct, gemm, gemm_lift)", algo);
  if (!cpu_conv_supported(l, algo))
    return "gemm_lift does not support this convolution (it needs stride 1 and a kernel larger than 1x1)";
  const std::int64_t need = cpu_conv_workspace(l, algo, batch);
  if (need < 0) return fmt::format("on {} samples it needs more workspace than 64 bits count", batch);
  if (workspace_bytes < need)
    return fmt::format("{} bytes of workspace stated, the kernel needs {} on {} samples", workspace_bytes, need, batch);
  return "";
}

std::int64_t cudnn_micro_batch_granule(const Graph& g, int layer) {
  const int in = g.layers[layer].inputs.at(0);
  std::int64_t granule = 1;
  for (const std::int64_t bytes : {g.out_bytes_per_sample(in), g.out_bytes_per_sample(layer),
                                   g.gradient_bytes_per_sample(in), g.gradient_bytes_per_sample(layer)})
    granule = std::max(granule, 4 / std::gcd(bytes, std::int64_t{4}));
  return granule;
}

namespace {

class Checker {
 public:
  Checker(const Plan& p, bool lenient) : p_(p), lenient_(lenient) {}
  void run();
  const std::string& first_schedule_error() const { return first_schedule_error_; }

 private:
  // A carried buffer's version once the round's ahead prefetch has written the next round's slice.
  static constexpr int kNextRound = -2;
  struct BufferState {
    int version = -1;   // version of its tensor it holds; -1: nothing valid, kNextRound: the next round's
    bool dead = false;  // its bytes were taken by another buffer
    int killer = -1;    // the buffer that took them
    int killed_at = -1;
    Clock last{-1, -1, -1};  // last access per stream
    int writer = -1;
    int first = -1, last_step = -1;
  };
  struct HostState {
    int version = -1;
    int writer = -1;  // d2h step that wrote it; -1 when loaded before the iteration
    Clock readers{-1, -1, -1};
  };
  struct Segment {
    std::int64_t end;
    int buffer;
  };

  std::string step_name(const PlanStep& s) const {
    return fmt::format("step {} ({} {})", s.id, step_op_name(s.op), s.stream == Stream::Compute ? s.layer : s.tensor);
  }
  // An error in what the plan computes or when (lifetimes, versions, waits, order, predicted
  // times, stated totals) that leaves every access inside its buffers with the operands its kernel
  // needs: the first one stops the check, unless lenient (find_unsafe_plan_error).
  void schedule_error(std::string what) {
    if (!lenient_) invalid(std::move(what));
    if (first_schedule_error_.empty()) first_schedule_error_ = std::move(what);
  }
  bool hb(int a, int b) const {  // step a happens before (or is) step b
    if (a < 0) return true;
    return clocks_[b][stream_of_[a]] >= a;
  }
  void check_structure();
  void rebuild_tasks();
  void activate(int buffer, int step);
  void touch(int buffer, int step, bool write);
  int tensor_id(const std::string& name) const;
  int buffer_for(const PlanStep& s, const std::vector<int>& list, int tensor, const char* what);
  void read(const PlanStep& s, int buffer, int tensor);
  void write(const PlanStep& s, int buffer, int tensor, bool bump);
  void check_lists(const PlanStep& s, const std::vector<int>& reads, const std::vector<int>& writes,
                   const std::vector<int>& accs);
  void check_config(const PlanStep& s, int layer, bool conv);
  void check_kernels();
  void check_options();
  std::int64_t tensor_bytes(int tensor, std::int64_t batch) const;

  const Plan& p_;
  const bool lenient_;
  std::string first_schedule_error_;
  Graph g_;
  TaskGraph tg_;
  std::unordered_map<std::string, int> tensor_of_name_;
  std::vector<Clock> clocks_;
  std::vector<int> stream_of_;
  std::vector<BufferState> bs_;
  std::vector<HostState> hs_;
  std::vector<int> cur_;  // per tensor: current version
  std::map<std::int64_t, Segment> occupants_;
  int first_final_ = 0;
  bool cpu_family_ = false;                                  // the plan's algorithms are the CPU's
  std::map<std::pair<std::string, StepOp>, int> kernel_of_;  // (layer, op) -> kernels index
  std::vector<char> kernel_used_;
};

void Checker::check_structure() {
  // The plan's timings and decisions were made for the network it embeds, which its inputs name
  // by hash (pipeline.cpp): an edited network no longer matches them.
  if (sha256_hex(network_to_json_text(p_.network)) != p_.network_sha256)
    schedule_error(
        "the embedded network is not the one inputs.network_sha256 names: it was edited after the plan was made");
  if (p_.sub_batch < 1 || p_.rounds < 1 || checked_muladd(p_.sub_batch, p_.rounds, 0) != p_.batch)
    invalid(fmt::format("sub-batch {} x {} rounds does not make the batch {}", p_.sub_batch, p_.rounds, p_.batch));
  if (p_.arena_bytes < 0) invalid(fmt::format("the arena has a negative size ({} bytes)", p_.arena_bytes));
  if (p_.arena_bytes > p_.budget_bytes)
    schedule_error(fmt::format("the arena ({} bytes) exceeds the budget ({} bytes)", p_.arena_bytes, p_.budget_bytes));
  if (p_.summary.peak_bytes != p_.arena_bytes)
    schedule_error(
        fmt::format("summary peak {} differs from the arena size {}", p_.summary.peak_bytes, p_.arena_bytes));
  for (std::size_t i = 0; i < p_.buffers.size(); ++i) {
    const PlanBuffer& b = p_.buffers[i];
    if (b.id != static_cast<int>(i)) invalid(fmt::format("buffer {} has id {}", i, b.id));
    if (b.size <= 0)
      invalid(fmt::format("buffer {} ({}) has {} bytes: a buffer holds at least one", b.id, b.tensor, b.size));
    // offset + size may overflow; offset <= arena - size cannot (both sides are in range).
    if (b.offset < 0 || b.size > p_.arena_bytes || b.offset > p_.arena_bytes - b.size)
      invalid(fmt::format("buffer {} ({}) at offset {} with {} bytes lies outside the arena of {} bytes", b.id,
                          b.tensor, b.offset, b.size, p_.arena_bytes));
    if (b.offset % kAlignment != 0)
      invalid(fmt::format("buffer {} ({}) starts at offset {}, not on a {}-byte boundary", b.id, b.tensor, b.offset,
                          kAlignment));
    if (b.resident && b.carried) invalid(fmt::format("buffer {} ({}) is both resident and carried", b.id, b.tensor));
  }
  for (std::size_t i = 0; i < p_.host_buffers.size(); ++i) {
    if (p_.host_buffers[i].id != static_cast<int>(i))
      invalid(fmt::format("host buffer {} has id {}", i, p_.host_buffers[i].id));
    if (p_.host_buffers[i].size <= 0) invalid(fmt::format("host buffer {} has {} bytes", i, p_.host_buffers[i].size));
  }
  const int n = static_cast<int>(p_.steps.size());
  first_final_ = n;
  for (int i = 0; i < n; ++i) {
    const PlanStep& s = p_.steps[i];
    if (s.id != i) invalid(fmt::format("step {} has id {}", i, s.id));
    const int si = stream_index(s.stream);  // a known stream and op: the plan loader checks the names
    stream_of_.push_back(si);
    const bool op_ok = (s.stream == Stream::Compute && !is_copy(s.op)) ||
                       (s.stream == Stream::H2D && s.op == StepOp::Prefetch) ||
                       (s.stream == Stream::D2H && s.op == StepOp::Offload);
    if (!op_ok)
      invalid(fmt::format("{}: op \"{}\" cannot run on stream {}", step_name(s), step_op_name(s.op),
                          stream_name(s.stream)));
    if (s.ahead && (s.op != StepOp::Prefetch || s.final))
      invalid(fmt::format("{}: only a prefetch in the round copies the next round's slice (ahead)", step_name(s)));
    if (s.final) {
      if (first_final_ == n) first_final_ = i;
      if (si != 0 || s.op != StepOp::Update || !s.waits.empty())
        invalid(fmt::format("{}: final steps are updates on the compute stream, without waits", step_name(s)));
      if (!s.accumulates.empty() || s.workspace >= 0 || s.host >= 0 || !s.config.empty() ||
          s.config_workspace_bytes >= 0)
        invalid(fmt::format("{}: an update reads one gradient and writes one weight, nothing else", step_name(s)));
    } else if (first_final_ != n) {
      invalid(fmt::format("{}: a round step after the final steps", step_name(s)));
    }
    for (int w : s.waits) {
      if (w < 0 || w >= i) invalid(fmt::format("{}: waits for step {}, which is not an earlier step", step_name(s), w));
      if (p_.steps[w].final) invalid(fmt::format("{}: waits for final step {}", step_name(s), w));
      if (p_.steps[w].stream == s.stream)
        invalid(fmt::format("{}: waits for step {} on its own stream", step_name(s), w));
    }
    auto valid_buffers = [&](const std::vector<int>& v) {
      for (int b : v)
        if (b < 0 || b >= static_cast<int>(p_.buffers.size()))
          invalid(fmt::format("{}: unknown buffer {}", step_name(s), b));
    };
    valid_buffers(s.reads);
    valid_buffers(s.writes);
    valid_buffers(s.accumulates);
    if (s.workspace < -1 || s.workspace >= static_cast<int>(p_.buffers.size()))
      invalid(fmt::format("{}: unknown workspace buffer {}", step_name(s), s.workspace));
    if (s.host < -1 || s.host >= static_cast<int>(p_.host_buffers.size()))
      invalid(fmt::format("{}: unknown host buffer {}", step_name(s), s.host));
    if (s.end_ns < s.start_ns) schedule_error(fmt::format("{}: ends before it starts", step_name(s)));
  }
}

// The iteration's tasks, in the plan's own forward order (any valid topological order).
void Checker::rebuild_tasks() {
  std::string error;
  Program program;
  try {
    program = derive_program(p_, &error);
  } catch (const UserError& e) {
    invalid(std::string("the embedded network is invalid: ") + e.what());
  }
  if (!error.empty()) invalid(error);
  g_ = std::move(program.graph);
  tg_ = std::move(program.tasks);
  tensor_of_name_ = std::move(program.tensor_ids);
}

std::int64_t Checker::tensor_bytes(int tensor, std::int64_t batch) const {
  const Tensor& t = tg_.tensors[tensor];
  const std::int64_t b = checked_muladd(t.bytes_per_sample, batch, t.fixed_bytes);
  if (b < 0) invalid(fmt::format("{} at {} samples does not fit in 64 bits of bytes", t.name, batch));
  return b;
}

// The kernels list (one entry per convolution kernel and op) is what the plan states about each
// kernel's configuration; the steps must run exactly that, so the two cannot disagree. The
// algorithm family follows from the names: a measured plan with CPU names and none of cuDNN's own
// (cuDNN names the CPU does not have) is a CPU plan (then every name must be a CPU one), anything
// else is cuDNN's (every name one of cuDNN's for its op). cuDNN's forward algorithms include gemm
// and direct, so a majority of CPU names does not make a CPU plan: a measured cuDNN plan of one
// convolution on the network's input whose forward is cuDNN's gemm has one CPU name and one of
// cuDNN's own (its backward_filter), and was taken for a CPU plan until the thirtieth session.
void Checker::check_kernels() {
  std::int64_t cpu_names = 0, cudnn_names = 0;
  for (const PlanStep& s : p_.steps)
    for (const MicroStep& m : s.config) {
      if (cpu_algorithms().count(m.algo))
        ++cpu_names;
      else if (cudnn_algorithm(m.algo))
        ++cudnn_names;
    }
  cpu_family_ = p_.profile_source == "measured" && cpu_names > 0 && cudnn_names == 0;
  for (std::size_t i = 0; i < p_.kernels.size(); ++i) {
    const PlanKernel& k = p_.kernels[i];
    const int l = g_.index_of(k.layer);
    if (l <= 0 || g_.layers[l].type() != LayerType::Conv)
      invalid(fmt::format("kernels[{}]: \"{}\" is not a convolution layer", i, k.layer));
    if (k.op != StepOp::Forward && k.op != StepOp::BackwardData && k.op != StepOp::BackwardFilter)
      invalid(fmt::format("kernels[{}]: {} is not a convolution op", i, step_op_name(k.op)));
    if (!kernel_of_.emplace(std::make_pair(k.layer, k.op), static_cast<int>(i)).second)
      invalid(fmt::format("kernels[{}]: a second entry for {} of {}", i, step_op_name(k.op), k.layer));
    if (k.workspace_bytes < 0) invalid(fmt::format("kernels[{}]: a negative workspace", i));
    if (k.fastest_ns > k.time_ns)
      schedule_error(fmt::format("kernels[{}]: the fastest configuration ({} ns) is slower than the one chosen ({} ns)",
                                 i, k.fastest_ns, k.time_ns));
  }
  kernel_used_.assign(p_.kernels.size(), 0);
}

int Checker::tensor_id(const std::string& name) const {
  auto it = tensor_of_name_.find(name);
  return it == tensor_of_name_.end() ? -1 : it->second;
}

void Checker::activate(int b, int step) {
  const PlanBuffer& nb = p_.buffers[b];
  const std::int64_t lo = nb.offset, hi = nb.offset + nb.size;
  // Collect occupants of [lo, hi).
  auto it = occupants_.upper_bound(lo);
  if (it != occupants_.begin()) --it;
  std::vector<std::pair<std::int64_t, Segment>> overlapping;
  while (it != occupants_.end() && it->first < hi) {
    if (it->second.end > lo) overlapping.emplace_back(it->first, it->second);
    ++it;
  }
  for (const auto& [off, seg] : overlapping) {
    const int a = seg.buffer;
    const PlanBuffer& ab = p_.buffers[a];
    const std::int64_t x = std::max(lo, off), y = std::min(hi, seg.end);
    if (ab.resident || ab.carried)
      schedule_error(fmt::format("buffer {} ({}) overlaps {} buffer {} ({}) at bytes [{}, {})", b, nb.tensor,
                                 ab.resident ? "resident" : "carried", a, ab.tensor, x, y));
    if (ab.last_step >= step)
      schedule_error(
          fmt::format("buffers {} ({}) and {} ({}) share bytes [{}, {}) while both live (steps {}-{} and {}-{})", a,
                      ab.tensor, b, nb.tensor, x, y, ab.first_step, ab.last_step, nb.first_step, nb.last_step));
    for (int k = 0; k < kNumStreams; ++k) {
      int acc = bs_[a].last[k];
      if (!hb(acc, step))
        schedule_error(
            fmt::format("buffers {} ({}) and {} ({}) share bytes [{}, {}) but step {} (last use of the first) is not "
                        "ordered before step {} (first use of the second): a missing wait",
                        a, ab.tensor, b, nb.tensor, x, y, acc, step));
    }
    bs_[a].dead = true;
    bs_[a].killer = b;
    bs_[a].killed_at = step;
  }
  // Replace [lo, hi) by b, keeping the uncovered ends of split segments.
  for (const auto& [off, seg] : overlapping) {
    occupants_.erase(off);
    if (off < lo) occupants_[off] = Segment{lo, seg.buffer};
    if (seg.end > hi) occupants_[hi] = Segment{seg.end, seg.buffer};
  }
  occupants_[lo] = Segment{hi, b};
}

void Checker::touch(int b, int step, bool write) {
  BufferState& s = bs_[b];
  const PlanBuffer& pb = p_.buffers[b];
  if (!pb.resident && !pb.carried) {
    if (s.first < 0) {
      if (step != pb.first_step)
        schedule_error(fmt::format("buffer {} ({}) is first used by step {} but says first_step {}", b, pb.tensor, step,
                                   pb.first_step));
      activate(b, step);
      s.first = step;
    }
    if (step > pb.last_step)
      schedule_error(
          fmt::format("step {} uses buffer {} ({}) after its last_step {}", step, b, pb.tensor, pb.last_step));
    if (s.dead)
      schedule_error(fmt::format(
          "step {} uses buffer {} ({}) after its bytes were taken by buffer {} ({}) at step {}: a use after free", step,
          b, pb.tensor, s.killer, p_.buffers[s.killer].tensor, s.killed_at));
  }
  if (write) {
    for (int k = 0; k < kNumStreams; ++k)
      if (!hb(s.last[k], step))
        schedule_error(fmt::format("step {} writes buffer {} ({}) while step {} may still be using it: a missing wait",
                                   step, b, pb.tensor, s.last[k]));
    s.writer = step;
  }
  s.last[stream_of_[step]] = std::max(s.last[stream_of_[step]], step);
  s.last_step = step;
}

int Checker::buffer_for(const PlanStep& s, const std::vector<int>& list, int tensor, const char* what) {
  const std::string& name = tg_.tensors[tensor].name;
  int found = -1;
  for (int b : list)
    if (p_.buffers[b].tensor == name) {
      if (found >= 0) invalid(fmt::format("{}: lists two buffers holding {}", step_name(s), name));
      found = b;
    }
  if (found < 0) invalid(fmt::format("{}: {} {} but names no buffer holding it", step_name(s), what, name));
  const std::int64_t need = tg_.tensors[tensor].bytes(p_.sub_batch);
  if (p_.buffers[found].size < need)
    invalid(fmt::format("{}: buffer {} holding {} has {} bytes, the tensor needs {}", step_name(s), found, name,
                        p_.buffers[found].size, need));
  return found;
}

void Checker::read(const PlanStep& s, int b, int t) {
  BufferState& st = bs_[b];
  const std::string& name = tg_.tensors[t].name;
  touch(b, s.id, false);
  if (st.version == kNextRound)
    schedule_error(
        fmt::format("{}: reads {} from carried buffer {} after step {} copied the next round's slice into it",
                    step_name(s), name, b, st.writer));
  if (st.version < 0)
    schedule_error(
        fmt::format("{}: reads {} from buffer {}, which holds no value of it (a missing prefetch or recompute?)",
                    step_name(s), name, b));
  if (st.version != cur_[t])
    schedule_error(fmt::format("{}: reads a stale copy of {} from buffer {} (version {}, current {})", step_name(s),
                               name, b, st.version, cur_[t]));
  if (!hb(st.writer, s.id))
    schedule_error(fmt::format("{}: reads {} from buffer {} without waiting for step {}, which writes it", step_name(s),
                               name, b, st.writer));
}

void Checker::write(const PlanStep& s, int b, int t, bool bump) {
  touch(b, s.id, true);
  if (bump) ++cur_[t];
  bs_[b].version = cur_[t];
}

void Checker::check_lists(const PlanStep& s, const std::vector<int>& reads, const std::vector<int>& writes,
                          const std::vector<int>& accs) {
  if (s.reads.size() != reads.size() || s.writes.size() != writes.size() || s.accumulates.size() != accs.size())
    invalid(fmt::format("{}: touches {}/{}/{} buffers (read/written/accumulated) but its task needs {}/{}/{}",
                        step_name(s), s.reads.size(), s.writes.size(), s.accumulates.size(), reads.size(),
                        writes.size(), accs.size()));
  std::vector<int> rb, wb, ab;
  for (int t : reads) rb.push_back(buffer_for(s, s.reads, t, "reads"));
  for (int t : accs) ab.push_back(buffer_for(s, s.accumulates, t, "accumulates into"));
  for (int t : writes) wb.push_back(buffer_for(s, s.writes, t, "writes"));
  for (std::size_t i = 0; i < reads.size(); ++i) read(s, rb[i], reads[i]);
  for (std::size_t i = 0; i < accs.size(); ++i) read(s, ab[i], accs[i]);
  if (s.workspace >= 0) {
    if (p_.buffers[s.workspace].tensor != "workspace")
      invalid(fmt::format("{}: its workspace buffer {} holds {}", step_name(s), s.workspace,
                          p_.buffers[s.workspace].tensor));
    touch(s.workspace, s.id, true);
  }
  for (std::size_t i = 0; i < accs.size(); ++i) write(s, ab[i], accs[i], true);
  for (std::size_t i = 0; i < writes.size(); ++i) write(s, wb[i], writes[i], s.op != StepOp::Recompute);
}

void Checker::check_config(const PlanStep& s, int layer, bool conv) {
  if (!conv) {
    if (!s.config.empty() || s.config_workspace_bytes >= 0)
      invalid(fmt::format("{}: a configuration on a step that is not a convolution", step_name(s)));
    if (s.workspace >= 0) invalid(fmt::format("{}: a workspace on a step that is not a convolution", step_name(s)));
    return;
  }
  if (s.config.empty()) invalid(fmt::format("{}: a convolution without a configuration", step_name(s)));
  const GraphLayer& gl = g_.layers[layer];
  const StepOp kernel_op = s.op == StepOp::Recompute ? StepOp::Forward : s.op;
  const std::string op = step_op_name(kernel_op);
  std::int64_t total = 0, need = 0;
  const std::int64_t granule = cpu_family_ ? 1 : cudnn_micro_batch_granule(g_, layer);
  for (const auto& m : s.config) {
    if (m.batch < 1 || m.batch > p_.sub_batch)
      invalid(
          fmt::format("{}: a micro-batch of {} samples (the sub-batch is {})", step_name(s), m.batch, p_.sub_batch));
    if (total % granule != 0)
      invalid(
          fmt::format("{}: a micro-batch starts {} samples in, not 4-byte aligned for cuDNN (its operands have an "
                      "odd number of 16-bit values a sample: micro-batches start at multiples of {})",
                      step_name(s), total, granule));
    total += m.batch;  // no overflow: each term <= sub-batch, checked before adding the next
    if (total > p_.sub_batch) break;
    if (cpu_family_ && cpu_algorithms().count(m.algo)) {
      if (!cpu_conv_supported(gl, m.algo))
        invalid(
            fmt::format("{}: the CPU algorithm \"{}\" does not support this convolution (gemm_lift needs stride 1 "
                        "and a kernel larger than 1x1)",
                        step_name(s), m.algo));
      const std::int64_t w = cpu_conv_workspace(gl, m.algo, m.batch);
      if (w < 0)
        invalid(fmt::format("{}: \"{}\" on {} samples needs more workspace than 64 bits count", step_name(s), m.algo,
                            m.batch));
      need = std::max(need, w);
    }
    if (cpu_family_ && !cpu_algorithms().count(m.algo)) {
      invalid(fmt::format("{}: \"{}\" is not a {} algorithm of this CPU plan (direct, gemm, gemm_lift)", step_name(s),
                          m.algo, op));
    } else if (!cpu_family_ && !cuda_algorithms(kernel_op).count(m.algo)) {
      invalid(fmt::format("{}: \"{}\" is not a {} algorithm of {} (a plan uses the algorithms of one device)",
                          step_name(s), m.algo, op, p_.profile_source == "measured" ? "this plan's device" : "cuDNN"));
    }
  }
  if (total != p_.sub_batch)
    invalid(
        fmt::format("{}: micro-batches add up to {} samples, the sub-batch is {}", step_name(s), total, p_.sub_batch));
  auto k = kernel_of_.find({gl.name(), kernel_op});
  if (k == kernel_of_.end())
    invalid(fmt::format("{}: the plan's kernels list has no entry for {} of {}", step_name(s), op, gl.name()));
  const PlanKernel& pk = p_.kernels[k->second];
  // A recomputation may use another configuration than the forward pass (less workspace may be
  // free at that point); the kernels list describes the forward pass.
  const bool listed = pk.config == s.config;
  if (!listed && s.op != StepOp::Recompute)
    invalid(fmt::format("{}: its micro-configuration differs from the kernels list's for {} of {}", step_name(s), op,
                        gl.name()));
  if (s.op != StepOp::Recompute) {
    if (kernel_used_[k->second])
      schedule_error(fmt::format("{}: a second step runs {} of {}", step_name(s), op, gl.name()));
    kernel_used_[k->second] = 1;
  }
  // Its predicted duration is the one the kernels list states for its configuration, so the
  // plan's times and its kernel table tell one story (the times themselves come from the profile).
  if (listed && s.end_ns - s.start_ns != pk.time_ns)
    schedule_error(fmt::format("{}: lasts {} ns, the kernels list states {} ns for its configuration", step_name(s),
                               s.end_ns - s.start_ns, pk.time_ns));
  // The workspace: what the kernels need, exactly computed for the CPU algorithms; for cuDNN
  // what the profile measured, as the plan states it (per kernel in the kernels list, and on a
  // recomputation, which may run another configuration), which the CUDA executor checks against
  // cuDNN's own answer before it runs anything. A cuDNN recomputation that states nothing for a
  // configuration the kernels list does not describe could run in any workspace: refused.
  const std::int64_t stated = s.config_workspace_bytes;  // -1: none
  if (s.op != StepOp::Recompute && stated >= 0)
    invalid(
        fmt::format("{}: states the workspace of its configuration, which only a recomputation does (the "
                    "kernels list states it for the others)",
                    step_name(s)));
  if (listed && stated >= 0 && stated != pk.workspace_bytes)
    invalid(fmt::format("{}: states {} bytes of workspace for the configuration the kernels list states {} for",
                        step_name(s), stated, pk.workspace_bytes));
  if (!cpu_family_) {
    if (!listed && stated < 0)
      invalid(
          fmt::format("{}: runs a configuration the kernels list does not describe and states no workspace for it "
                      "(config_workspace_bytes)",
                      step_name(s)));
    need = listed ? pk.workspace_bytes : stated;
  } else {
    if (listed && pk.workspace_bytes < need)
      invalid(fmt::format("{}: the kernels list states {} bytes of workspace for {} of {}, its configuration needs {}",
                          step_name(s), pk.workspace_bytes, op, gl.name(), need));
    if (stated >= 0 && stated < need)
      invalid(fmt::format("{}: states {} bytes of workspace, its configuration needs {}", step_name(s), stated, need));
  }
  const std::int64_t have = s.workspace >= 0 ? p_.buffers[s.workspace].size : 0;
  if (have < need)
    invalid(fmt::format("{}: needs {} bytes of workspace, {}", step_name(s), need,
                        s.workspace >= 0 ? fmt::format("its workspace buffer {} has {}", s.workspace, have)
                                         : std::string("it has no workspace buffer")));
}

// The options the plan records (explain prints them) hold for its steps, as far as the plan alone
// can tell: what they rule out does not happen (what they mean for its times, `check --recompile`
// reproduces).
void Checker::check_options() {
  auto count = [&](StepOp op) {
    return std::count_if(p_.steps.begin(), p_.steps.end(), [op](const PlanStep& s) { return s.op == op; });
  };
  const auto offloads = count(StepOp::Offload), recomputes = count(StepOp::Recompute);
  if (p_.offload == "never" && offloads > 0)
    schedule_error(fmt::format("options.offload is never, but {} steps offload", offloads));
  if (p_.strategy == "keep-all" && offloads + recomputes > 0)
    schedule_error(
        fmt::format("options.strategy is keep-all, but {} steps offload and {} recompute", offloads, recomputes));
  // --sub-batch: N samples a round, or auto, which never splits a batch-norm network.
  if (p_.sub_batch_option == "auto") {
    if (g_.has_batch_norm() && p_.rounds > 1)
      schedule_error(
          fmt::format("options.sub_batch is auto, which never splits a batch-norm network, but the plan "
                      "runs {} rounds",
                      p_.rounds));
  } else if (p_.sub_batch_option != "any" && p_.sub_batch_option != std::to_string(p_.sub_batch)) {
    schedule_error(
        fmt::format("options.sub_batch is \"{}\", but the plan's sub-batch is {}", p_.sub_batch_option, p_.sub_batch));
  }
  // --workspace: the kernels' workspaces within the limit (wr: each, wd: together), and the
  // policy in words saying the same.
  const std::string& w = p_.workspace_option;
  const std::string kind = w.substr(0, w.find(':'));
  const char* policy = kind == "wr" ? "WR:" : kind == "wd" ? "WD:" : "dynamic:";
  if (p_.workspace_policy.rfind(policy, 0) != 0)
    schedule_error(
        fmt::format("workspace_policy \"{}\" is not what options.workspace \"{}\" makes", p_.workspace_policy, w));
  if (kind == "wr" || kind == "wd") {
    const std::optional<std::int64_t> limit = parse_bytes(w.substr(3));
    if (!limit) {
      schedule_error(fmt::format("options.workspace \"{}\" is not wr:SIZE or wd:SIZE", w));
    } else {
      std::int64_t total = 0, largest = 0;
      for (const PlanKernel& k : p_.kernels) {
        total = checked_muladd(1, total, k.workspace_bytes);
        largest = std::max(largest, k.workspace_bytes);
      }
      if (kind == "wr" && largest > *limit)
        schedule_error(fmt::format("options.workspace is {}, but a kernel's workspace is {} bytes", w, largest));
      if (kind == "wd" && (total < 0 || total > *limit))
        schedule_error(
            fmt::format("options.workspace is {}, but the kernels' workspaces add up to {} bytes", w, total));
    }
  } else if (w != "dynamic") {
    schedule_error(fmt::format("options.workspace \"{}\" is not dynamic, wr:SIZE or wd:SIZE", w));
  }
  // --micro-batches: the sizes a convolution's micro-batches take.
  for (const PlanStep& s : p_.steps)
    for (const MicroStep& m : s.config) {
      const bool whole = m.batch == p_.sub_batch, power = (m.batch & (m.batch - 1)) == 0;
      if ((p_.micro_batches == "undivided" && !whole) || (p_.micro_batches == "powerOfTwo" && !whole && !power)) {
        schedule_error(fmt::format("{}: a micro-batch of {} samples, which options.micro_batches {} does not allow",
                                   step_name(s), m.batch, p_.micro_batches));
        return;
      }
    }
}

void Checker::run() {
  check_structure();
  rebuild_tasks();
  check_kernels();
  const int n = static_cast<int>(p_.steps.size());
  bs_.assign(p_.buffers.size(), BufferState{});
  hs_.assign(p_.host_buffers.size(), HostState{});
  cur_.assign(tg_.tensors.size(), 0);
  // Values present before the round: weights, zeroed weight gradients, the inputs on the host.
  for (const Tensor& t : tg_.tensors)
    if (t.resident() || t.host_input) cur_[t.id] = 1;
  std::vector<char> resident_seen(tg_.tensors.size(), 0);
  for (const PlanBuffer& b : p_.buffers) {
    if (!b.resident) continue;
    int t = tensor_id(b.tensor);
    if (t < 0 || !tg_.tensors[t].resident())
      invalid(fmt::format("resident buffer {} holds {}, which is not a weight", b.id, b.tensor));
    if (resident_seen[t]) invalid(fmt::format("two resident buffers hold {}", b.tensor));
    resident_seen[t] = 1;
    if (b.size < tensor_bytes(t, 1)) invalid(fmt::format("resident buffer {} is smaller than {}", b.id, b.tensor));
    if (b.first_step != 0 || b.last_step != n - 1)
      schedule_error(fmt::format("resident buffer {} ({}) must live for the whole program", b.id, b.tensor));
    bs_[b.id].version = 1;
  }
  for (const Tensor& t : tg_.tensors)
    if (t.resident() && !resident_seen[t.id]) invalid(fmt::format("no resident buffer holds {}", t.name));
  // A carried buffer holds a network input's slice of the round when the round starts (plan.h).
  std::vector<char> carried_seen(tg_.tensors.size(), 0);
  for (const PlanBuffer& b : p_.buffers) {
    if (!b.carried) continue;
    int t = tensor_id(b.tensor);
    if (t < 0 || !tg_.tensors[t].host_input || tg_.tensors[t].kind != TensorKind::Activation)
      invalid(fmt::format("carried buffer {} holds {}, which is not the network's input", b.id, b.tensor));
    if (carried_seen[t]) invalid(fmt::format("two carried buffers hold {}", b.tensor));
    carried_seen[t] = 1;
    if (b.size < tensor_bytes(t, p_.sub_batch))
      invalid(fmt::format("carried buffer {} is smaller than {} at the sub-batch", b.id, b.tensor));
    if (b.first_step != 0 || b.last_step != n - 1)
      schedule_error(fmt::format("carried buffer {} ({}) must live for the whole program", b.id, b.tensor));
    bs_[b.id].version = 1;
  }
  // Resident and carried buffers occupy their bytes for the whole program; nothing else may share them.
  for (const PlanBuffer& b : p_.buffers)
    if (b.resident || b.carried) {
      auto it = occupants_.lower_bound(b.offset);
      bool clash = (it != occupants_.end() && it->first < b.offset + b.size) ||
                   (it != occupants_.begin() && std::prev(it)->second.end > b.offset);
      if (clash) schedule_error(fmt::format("resident or carried buffers overlap at buffer {} ({})", b.id, b.tensor));
      occupants_[b.offset] = Segment{b.offset + b.size, b.id};
    }
  for (const PlanHostBuffer& h : p_.host_buffers) {
    int t = tensor_id(h.tensor);
    if (t < 0) invalid(fmt::format("host buffer {} holds unknown tensor {}", h.id, h.tensor));
    const std::int64_t need = tensor_bytes(t, h.input ? p_.batch : p_.sub_batch);
    if (h.input != tg_.tensors[t].host_input || h.size != need)
      invalid(fmt::format("host buffer {} ({}) has {} bytes, needs {}{}", h.id, h.tensor, h.size, need,
                          h.input ? " (the whole batch)" : ""));
    if (h.input) hs_[h.id].version = 1;
  }

  std::vector<int> round_tasks, final_tasks;
  for (const Task& t : tg_.tasks) (t.round_task ? round_tasks : final_tasks).push_back(t.id);
  std::size_t next_task = 0;
  clocks_.assign(n, Clock{-1, -1, -1});
  std::array<int, kNumStreams> last_on{-1, -1, -1};
  std::int64_t round_end = 0;
  for (int i = 0; i < first_final_; ++i) {
    const PlanStep& s = p_.steps[i];
    const int si = stream_of_[i];
    Clock c = last_on[si] >= 0 ? clocks_[last_on[si]] : Clock{-1, -1, -1};
    std::int64_t start = last_on[si] >= 0 ? p_.steps[last_on[si]].end_ns : 0;
    for (int w : s.waits) {
      for (int k = 0; k < kNumStreams; ++k) c[k] = std::max(c[k], clocks_[w][k]);
      start = std::max(start, p_.steps[w].end_ns);
    }
    c[si] = i;
    clocks_[i] = c;
    last_on[si] = i;
    if (s.start_ns != start)
      schedule_error(fmt::format("{}: predicted start {} ns, but its stream and waits give {} ns", step_name(s),
                                 s.start_ns, start));
    round_end = std::max(round_end, s.end_ns);

    if (s.op == StepOp::Prefetch || s.op == StepOp::Offload) {
      int t = tensor_id(s.tensor);
      if (t < 0 || tg_.tensors[t].resident())
        invalid(fmt::format("{}: moves \"{}\", which is not a movable tensor", step_name(s), s.tensor));
      // An input host buffer holds the whole batch, loaded before the iteration; every round
      // prefetches its own slice, so an offload into it would overwrite the data loader's batch.
      if (s.op == StepOp::Offload && s.host >= 0 && p_.host_buffers[s.host].input)
        schedule_error(
            fmt::format("{}: offloads into host buffer {}, which holds the batch's input", step_name(s), s.host));
      if (s.host < 0 || p_.host_buffers[s.host].tensor != s.tensor)
        invalid(fmt::format("{}: its host buffer does not hold {}", step_name(s), s.tensor));
      if (!s.accumulates.empty() || s.workspace >= 0 || !s.config.empty() || s.config_workspace_bytes >= 0)
        invalid(fmt::format("{}: a copy only reads one buffer and writes one", step_name(s)));
      HostState& h = hs_[s.host];
      if (s.op == StepOp::Offload) {
        if (s.reads.size() != 1 || !s.writes.empty())
          invalid(fmt::format("{}: an offload reads one device buffer", step_name(s)));
        int b = buffer_for(s, s.reads, t, "offloads");
        read(s, b, t);
        for (int k = 0; k < kNumStreams; ++k)
          if (!hb(h.readers[k], i))
            schedule_error(fmt::format("{}: overwrites host buffer {} while step {} may still read it", step_name(s),
                                       s.host, h.readers[k]));
        h.version = cur_[t];
        h.writer = i;
      } else {
        if (s.writes.size() != 1 || !s.reads.empty())
          invalid(fmt::format("{}: a prefetch writes one device buffer", step_name(s)));
        if (h.version < 0)
          schedule_error(fmt::format("{}: prefetches {} from host buffer {}, which holds no value of it", step_name(s),
                                     s.tensor, s.host));
        if (h.version != cur_[t])
          schedule_error(fmt::format("{}: prefetches a stale host copy of {} (version {}, current {})", step_name(s),
                                     s.tensor, h.version, cur_[t]));
        if (!hb(h.writer, i))
          schedule_error(fmt::format("{}: prefetches {} without waiting for step {}, which offloads it", step_name(s),
                                     s.tensor, h.writer));
        int b = buffer_for(s, s.writes, t, "prefetches");
        if (s.ahead && (!p_.buffers[b].carried || !p_.host_buffers[s.host].input))
          invalid(
              fmt::format("{}: copies the next round's slice into buffer {}, which is not a carried buffer of "
                          "the batch's input",
                          step_name(s), b));
        touch(b, i, true);
        bs_[b].version = s.ahead ? kNextRound : h.version;
        h.readers[si] = i;
      }
      continue;
    }
    if (s.op == StepOp::Update) invalid(fmt::format("{}: an update inside the round", step_name(s)));
    if (s.host >= 0) invalid(fmt::format("{}: a compute step does not use host buffers", step_name(s)));
    int l = g_.index_of(s.layer);
    if (l <= 0) invalid(fmt::format("{}: unknown layer \"{}\"", step_name(s), s.layer));
    if (s.op == StepOp::Recompute) {
      const int y = tg_.y_of[l];
      if (cur_[y] == 0)
        schedule_error(fmt::format("{}: recomputes {} before it was ever computed", step_name(s), tg_.tensors[y].name));
      check_config(s, l, g_.layers[l].type() == LayerType::Conv);
      check_lists(s, tg_.recompute_reads(l), {y}, {});
      continue;
    }
    if (next_task >= round_tasks.size())
      invalid(fmt::format("{}: more compute steps than the iteration has tasks", step_name(s)));
    const Task& t = tg_.tasks[round_tasks[next_task++]];
    if (s.op != step_op_of(t.kind) || l != t.layer)
      invalid(fmt::format("{}: expected {} of {} at this point of the round", step_name(s), task_kind_name(t.kind),
                          g_.layers[t.layer].name()));
    check_config(s, l, t.conv_kernel);
    check_lists(s, t.reads, t.writes, t.accumulates);
  }
  if (next_task != round_tasks.size()) {
    const Task& t = tg_.tasks[round_tasks[next_task]];
    schedule_error(fmt::format("the plan never runs {} of {}", task_kind_name(t.kind), g_.layers[t.layer].name()));
  }
  // The next round starts from what the round leaves in its carried buffers.
  for (const PlanBuffer& b : p_.buffers)
    if (b.carried && bs_[b.id].version != kNextRound)
      schedule_error(
          fmt::format("carried buffer {} ({}) does not hold the next round's slice when the round ends: no ahead "
                      "prefetch writes it after its last use",
                      b.id, b.tensor));
  // Final phase: the updates, in order, on the compute stream.
  std::int64_t t_final = 0;
  const std::string finals =
      fmt::format("the plan has {} final steps, the iteration has {} updates", n - first_final_, final_tasks.size());
  if (static_cast<std::size_t>(n - first_final_) > final_tasks.size()) invalid(finals);
  if (static_cast<std::size_t>(n - first_final_) < final_tasks.size()) schedule_error(finals);
  std::vector<int> update_of(g_.layers.size(), -1);  // layer -> its update task
  for (int t : final_tasks) update_of[tg_.tasks[t].layer] = t;
  for (int i = first_final_; i < n; ++i) {
    const PlanStep& s = p_.steps[i];
    const int l = g_.index_of(s.layer);
    if (l <= 0 || update_of[l] < 0)
      invalid(fmt::format("{}: \"{}\" is not a layer with weights", step_name(s), s.layer));
    const Task& t = tg_.tasks[update_of[l]];  // what the step runs, though it may be out of place
    if (l != tg_.tasks[final_tasks[i - first_final_]].layer)
      schedule_error(fmt::format("{}: expected update of {}", step_name(s),
                                 g_.layers[tg_.tasks[final_tasks[i - first_final_]].layer].name()));
    if (s.start_ns != t_final)
      schedule_error(fmt::format("{}: predicted start {} ns, the previous update ends at {} ns", step_name(s),
                                 s.start_ns, t_final));
    t_final = s.end_ns;
    for (int b : s.reads)
      if (!p_.buffers[b].resident) invalid(fmt::format("{}: an update touches a non-resident buffer", step_name(s)));
    for (int b : s.writes)
      if (!p_.buffers[b].resident) invalid(fmt::format("{}: an update touches a non-resident buffer", step_name(s)));
    if (s.reads.size() != 1 || s.writes.size() != 1 || p_.buffers[s.reads[0]].tensor != tg_.tensors[t.reads[0]].name ||
        p_.buffers[s.writes[0]].tensor != tg_.tensors[t.writes[0]].name)
      invalid(fmt::format("{}: an update reads the weight gradient and writes the weight", step_name(s)));
  }
  for (std::size_t b = 0; b < p_.buffers.size(); ++b) {
    const PlanBuffer& pb = p_.buffers[b];
    if (pb.resident || pb.carried) continue;
    if (bs_[b].first < 0) schedule_error(fmt::format("buffer {} ({}) is never used", b, pb.tensor));
    if (bs_[b].last_step != pb.last_step)
      schedule_error(fmt::format("buffer {} ({}) says last_step {} but its last use is step {}", b, pb.tensor,
                                 pb.last_step, bs_[b].last_step));
  }
  std::int64_t high_water = 0;
  for (const PlanBuffer& b : p_.buffers) high_water = std::max(high_water, b.offset + b.size);
  if (high_water != p_.arena_bytes)
    schedule_error(fmt::format("the arena has {} bytes, its buffers end at {}: the arena is their high-water mark",
                               p_.arena_bytes, high_water));
  for (std::size_t k = 0; k < p_.kernels.size(); ++k)
    if (!kernel_used_[k])
      schedule_error(fmt::format("kernels[{}]: no step runs {} of {}", k, p_.kernels[k].op, p_.kernels[k].layer));
  const PlanSummary& sum = p_.summary;
  if (sum.round_ns != round_end)
    schedule_error(fmt::format("summary round time {} ns, the steps give {} ns", sum.round_ns, round_end));
  if (sum.final_ns != t_final)
    schedule_error(fmt::format("summary final time {} ns, the steps give {} ns", sum.final_ns, t_final));
  const std::int64_t iteration = checked_muladd(p_.rounds, round_end, t_final);
  if (iteration < 0) schedule_error("the iteration's predicted time does not fit in 64 bits of nanoseconds");
  if (sum.predicted_ns != iteration)
    schedule_error(
        fmt::format("summary iteration time {} ns, rounds x round + final give {} ns", sum.predicted_ns, iteration));
  check_options();
  // What the plan says of its statistics (the compile report and explain print it): a batch-norm
  // network in more than one round normalises each sub-batch on its own.
  const bool per_sub_batch = g_.has_batch_norm() && p_.rounds > 1;
  if (p_.sub_batch_changes_statistics != per_sub_batch)
    schedule_error(fmt::format("sub_batch_changes_statistics is {}, but its batch-norm statistics are {}",
                               p_.sub_batch_changes_statistics, per_sub_batch ? "per sub-batch" : "the whole batch's"));
  // The totals a report prints (explain, run's bytes moved) are the steps' own: round steps count
  // once per round, final steps once. (The ideal time and the lower bound need the profile and the
  // planner's passes: `check --recompile` compares those.)
  std::int64_t offload = 0, prefetch = 0, input = 0, recompute_ns = 0, recompute_steps = 0, workspace = 0;
  auto add = [this](std::int64_t& total, std::int64_t each, std::int64_t times) {
    total = checked_muladd(each, times, total);
    if (total < 0) schedule_error("the summary's totals do not fit in 64 bits");
  };
  for (const PlanStep& s : p_.steps) {
    const std::int64_t times = s.final ? 1 : p_.rounds;
    if (s.op == StepOp::Offload || s.op == StepOp::Prefetch) {
      const std::int64_t bytes = tensor_bytes(tensor_id(s.tensor), p_.sub_batch);
      add(s.op == StepOp::Offload ? offload : prefetch, bytes, times);
      if (s.op == StepOp::Prefetch && p_.host_buffers[s.host].input) add(input, bytes, times);
    }
    if (s.op == StepOp::Recompute) {
      add(recompute_ns, s.end_ns - s.start_ns, times);
      if (!s.final) ++recompute_steps;
    }
    if (s.workspace >= 0) workspace = std::max(workspace, p_.buffers[s.workspace].size);
  }
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> totals[] = {
      {"offload_bytes", {sum.offload_bytes, offload}},
      {"prefetch_bytes", {sum.prefetch_bytes, prefetch}},
      {"input_bytes", {sum.input_bytes, input}},
      {"recompute_ns", {sum.recompute_ns, recompute_ns}},
      {"recompute_steps", {sum.recompute_steps, recompute_steps}},
      {"workspace_peak_bytes", {sum.workspace_peak_bytes, workspace}}};
  for (const auto& [name, v] : totals)
    if (v.first != v.second)
      schedule_error(fmt::format("summary.{} is {}, the steps give {}", name, v.first, v.second));
}

}  // namespace

std::string find_plan_error(const Plan& plan) {
  try {
    Checker c(plan, false);
    c.run();
  } catch (const Invalid& e) {
    return e.what;
  }
  return "";
}

std::string find_unsafe_plan_error(const Plan& plan, std::string* schedule_error) {
  Checker c(plan, true);
  std::string unsafe;
  try {
    c.run();
  } catch (const Invalid& e) {
    unsafe = e.what;
  }
  *schedule_error = c.first_schedule_error();
  return unsafe;
}

}  // namespace ucplan
