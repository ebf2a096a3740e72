#include "json_util.h"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "errors.h"

namespace ucplan {

std::string json_type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return fmt::format("the string \"{}\"", j.get<std::string>());
    case Json::value_t::boolean:
      return j.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return fmt::format("the number {}", j.dump());
    default:
      return "an unsupported value";
  }
}

namespace {

// Duplicate object keys are legal JSON that nlohmann resolves silently (the last wins); for our
// files a repeated key is always a mistake, so the parser tracks the keys of every open object,
// and the JSON path to name the repeated one. It is a SAX handler around nlohmann's own DOM
// builder: nlohmann 3.11's parser with a callback rescans the enclosing container after every
// object it ends, so a file of n layers took O(n^2) (22 s at 400,000 objects), this O(n).
class CheckedDomParser {
 public:
  struct Found {
    std::string path;
  };
  explicit CheckedDomParser(Json& result) : dom_(result, true) {}

  bool null() { return value(), dom_.null(); }
  bool boolean(bool v) { return value(), dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) { return value(), dom_.number_integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return value(), dom_.number_unsigned(v); }
  bool number_float(Json::number_float_t v, const Json::string_t& text) { return value(), dom_.number_float(v, text); }
  bool string(Json::string_t& v) { return value(), dom_.string(v); }
  bool binary(Json::binary_t& v) { return value(), dom_.binary(v); }
  bool start_object(std::size_t n) {
    value();
    frames_.push_back(Frame{true, {}, {}, -1});
    return dom_.start_object(n);
  }
  bool key(Json::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(f.key).second) throw Found{path()};
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    value();
    frames_.push_back(Frame{false, {}, {}, -1});
    return dom_.start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& ex) {
    return dom_.parse_error(position, last_token, ex);  // throws it
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    long index;
  };
  void value() {  // a value begins: the next element of an enclosing array
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.object)
        p += (p.empty() ? "" : ".") + f.key;
      else
        p += "[" + std::to_string(f.index) + "]";
    }
    return p;
  }
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::vector<Frame> frames_;
};

std::string line_column(const std::string& text, std::size_t byte) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("line {} column {}", line, column);
}

}  // namespace

std::string read_file_bytes(const std::string& path, std::string_view what) {
  const std::string named = path.empty() ? "\"\"" : path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(named, "", fmt::format("is a folder, not a {}", what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(named, "", fmt::format("cannot read the file ({})", std::strerror(errno)));
  // In pieces, so that an endless device is refused at the limit instead of filling the memory
  // (on the stack: the fuzzers read a small file per input, and a zeroed heap piece each time
  // doubled their run).
  std::string bytes;
  char piece[std::size_t{1} << 16];
  while (in) {
    in.read(piece, static_cast<std::streamsize>(sizeof piece));
    bytes.append(piece, static_cast<std::size_t>(in.gcount()));
    if (static_cast<std::int64_t>(bytes.size()) > kMaxInputBytes)
      throw UserError(named, "",
                      fmt::format("holds more than {} GiB: not a {} ucplan reads", kMaxInputBytes >> 30, what));
  }
  if (in.bad()) throw UserError(named, "", "cannot read the file");
  return bytes;
}

Json load_json_file(const std::string& path) {
  const std::string text = read_file_bytes(path, "JSON file");
  try {
    Json result;
    CheckedDomParser parser(result);
    Json::sax_parse(text, &parser);
    return result;
  } catch (const CheckedDomParser::Found& d) {
    throw UserError(path, d.path, "the key appears twice in this object (JSON allows it, but which one would count?)");
  } catch (const Json::out_of_range& e) {
    // A number too large for a double (1e400): nlohmann reports it as out_of_range.406 with the
    // number's text but not its place, so the place is that text's first occurrence.
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    std::string where;
    const auto q1 = what.find('\''), q2 = what.rfind('\'');
    if (q1 != std::string::npos && q2 > q1) {
      const std::size_t at = text.find(what.substr(q1 + 1, q2 - q1 - 1));
      if (at != std::string::npos) where = line_column(text, at);
    }
    throw UserError(path, where, "invalid JSON: " + what);
  } catch (const Json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    std::size_t byte = e.byte == 0 ? 0 : e.byte - 1;
    if (byte > text.size()) byte = text.size();
    std::string what = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line..": keep the tail.
    auto pos = what.find(": ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    throw UserError(path, line_column(text, byte), "invalid JSON: " + what);
  }
}

namespace {

// Where a write to `path` lands: the file a symbolic link names, followed link by link (so the
// link stays a link, also one that names a file not made yet), else the path itself.
std::filesystem::path output_target(const std::string& path) {
  namespace fs = std::filesystem;
  // A device or a pipe at the end of the links is written where it is named: /dev/stdout's link
  // names /proc/self/fd/1, whose own link names no path ("pipe:[N]") but opens as the pipe.
  std::error_code status_error;
  const fs::file_status st = fs::status(path, status_error);
  if (!status_error && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st)) return path;
  fs::path at = path;
  for (int hops = 0; hops < 40; ++hops) {  // 40: Linux's own limit on links followed (ELOOP)
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(at, ec))) break;
    const fs::path to = fs::read_symlink(at, ec);
    if (ec) break;
    at = to.is_relative() ? at.parent_path() / to : to;
  }
  return at;
}

// An existing path that is not a regular file (a device such as /dev/null, a pipe): written
// directly, since renaming a file over it would replace it.
bool is_special(const std::filesystem::path& target) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  return !ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool same = fs::equivalent(a, b, ec);
    return !ec && same;
  }
  const fs::path x = fs::weakly_canonical(fs::absolute(a, ec), ec), y = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return x == y;
}

std::string path_from_output(const std::string& file, const std::string& output) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path from = fs::current_path(ec);
  if (!output.empty() && !is_special(output_target(output)))
    from = fs::absolute(output_target(output), ec).parent_path();  // where the file lands (a link followed)
  const fs::path to = fs::weakly_canonical(fs::absolute(file, ec), ec);
  const fs::path rel = fs::relative(to, fs::weakly_canonical(from, ec), ec);
  return ec || rel.empty() ? to.generic_string() : rel.generic_string();
}

void check_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target = output_target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!target.has_filename() || fs::is_directory(target, ec))
    throw UserError(path, "", "is a folder: give a file name to write");
  if (is_special(target)) {
    if (::access(target.c_str(), W_OK) != 0) throw UserError(path, "", "cannot write to it");
    return;
  }
  if (!fs::is_directory(dir, ec))
    throw UserError(
        path, "",
        fs::exists(dir, ec) ? dir.string() + " is not a folder" : "the folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) throw UserError(path, "", "cannot write in " + dir.string());
}

void check_outputs(const std::vector<FileArgument>& outputs, const std::vector<FileArgument>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const FileArgument& out = outputs[i];
    if (out.path.empty()) continue;
    check_output_path(out.path);
    if (is_special(output_target(out.path))) continue;  // /dev/null may take every output
    for (const FileArgument& in : inputs)
      if (!in.path.empty() && same_file(out.path, in.path))
        throw UserError(out.path, out.option,
                        fmt::format("is also {}: writing there would destroy it; give another file", in.option));
    for (std::size_t k = 0; k < i; ++k)
      if (!outputs[k].path.empty() && same_file(out.path, outputs[k].path))
        throw UserError(out.path, out.option,
                        fmt::format("is also where {} writes: each output needs a file of its own", outputs[k].option));
  }
}

namespace {

// The temporaries being written, for a SIGINT or SIGTERM to remove before the process ends (the
// handler may only call async-signal-safe functions: unlink, signal, raise).
constexpr int kMaxTemps = 16;
char g_temps[kMaxTemps][4096];
volatile std::sig_atomic_t g_temp_count = 0;

extern "C" void remove_temps_and_die(int sig) {
  for (int i = 0; i < g_temp_count; ++i) ::unlink(g_temps[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// All of `text` to `fd`; false on a short write (a full disk).
bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  // Where each lands (a link followed), and whether it is a device or a pipe, written directly
  // (there is nothing to replace).
  std::vector<fs::path> targets;
  std::vector<char> special;
  for (std::size_t i = 0; i < files.size(); ++i) {
    check_output_path(files[i].first);
    targets.push_back(output_target(files[i].first));
    special.push_back(is_special(targets.back()));
    for (std::size_t k = 0; k < i && !special.back(); ++k)
      if (same_file(files[i].first, files[k].first))
        throw UserError(files[i].first, "", "is given for two outputs: each needs a file of its own");
  }
  // Every file goes to a temporary beside its target first, created afresh under a name no one
  // else holds (mkstemp: never through a link someone left there), with the mode the target has
  // (or a new file's). Then the devices and pipes are written, and only when all that worked are
  // the files renamed into place, so a failure leaves none of them changed.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  std::vector<std::string> temps(files.size());
  struct sigaction on_signal {
  }, old_int{}, old_term{};
  on_signal.sa_handler = remove_temps_and_die;
  ::sigemptyset(&on_signal.sa_mask);
  ::sigaction(SIGINT, &on_signal, &old_int);
  ::sigaction(SIGTERM, &on_signal, &old_term);
  auto restore_signals = [&]() {
    g_temp_count = 0;
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
  };
  auto discard = [&]() {
    std::error_code ec;
    for (const auto& t : temps)
      if (!t.empty()) fs::remove(t, ec);
    restore_signals();
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (special[i]) continue;
    const auto& [path, text] = files[i];
    const fs::path dir = targets[i].has_parent_path() ? targets[i].parent_path() : fs::path(".");
    struct stat existing {};
    const bool exists = ::stat(targets[i].c_str(), &existing) == 0;
    if (exists && ::access(targets[i].c_str(), W_OK) != 0) {
      discard();
      throw UserError(path, "", "is read-only: it is not replaced");
    }
    std::string name = (dir / ".ucplan-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) {
      discard();
      throw UserError(path, "", "cannot write in " + dir.string());
    }
    temps[i] = name;
    if (static_cast<int>(i) < kMaxTemps && name.size() < sizeof g_temps[0]) {
      std::memcpy(g_temps[g_temp_count], name.c_str(), name.size() + 1);
      g_temp_count = g_temp_count + 1;
    }
    const mode_t mode = exists ? (existing.st_mode & 07777) : (0666 & ~mask);
    const bool written = ::fchmod(fd, mode) == 0 && write_all(fd, text);
    if (::close(fd) != 0 || !written) {
      discard();
      throw UserError(path, "", "writing failed (disk full?)");
    }
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!special[i]) continue;
    std::ofstream out(targets[i], std::ios::binary);
    out << files[i].second;
    out.flush();
    if (!out) {
      discard();
      throw UserError(files[i].first, "", "writing failed");
    }
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (special[i]) continue;
    std::error_code ec;
    fs::rename(temps[i], targets[i], ec);
    if (ec) {
      // A rename within the temporary's own folder fails only when the folder changed meanwhile;
      // the outputs renamed before this one cannot be taken back, so the message names them.
      std::string replaced;
      for (std::size_t k = 0; k < i; ++k)
        if (!special[k]) replaced += (replaced.empty() ? "" : ", ") + files[k].first;
      discard();
      throw UserError(files[i].first, "",
                      "cannot replace the file: " + ec.message() +
                          (replaced.empty() ? "" : " (already written: " + replaced + ")"));
    }
    temps[i].clear();
  }
  restore_signals();
}

void write_file_atomically(const std::string& path, const std::string& text) { write_files_atomically({{path, text}}); }

namespace {

bool holds_object_array(const OrderedJson& j) {
  if (j.is_array()) {
    for (const auto& e : j)
      if (e.is_object()) return true;
    return false;
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items())
      if (holds_object_array(v)) return true;
  }
  return false;
}

// Objects are printed one key per line; an array of objects one element per line, each element
// on a single line unless it holds arrays of objects itself. So a plan has one line per step and
// a profile one line per measurement: files that diff well.
void emit(const OrderedJson& j, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  const std::string inner(static_cast<std::size_t>(indent + 1), ' ');
  if (j.is_object() && !j.empty() && holds_object_array(j)) {
    out += "{\n";
    std::size_t i = 0;
    for (const auto& [k, v] : j.items()) {
      out += inner + OrderedJson(k).dump() + ": ";
      emit(v, indent + 1, out);
      out += ++i < j.size() ? ",\n" : "\n";
    }
    out += pad + "}";
  } else if (j.is_object() && !j.empty() && indent == 0) {
    out += j.dump(1);
  } else if (j.is_array() && holds_object_array(j)) {
    out += "[\n";
    for (std::size_t i = 0; i < j.size(); ++i) {
      out += inner;
      if (holds_object_array(j[i]))
        emit(j[i], indent + 1, out);
      else
        out += j[i].dump();
      out += i + 1 < j.size() ? ",\n" : "\n";
    }
    out += pad + "]";
  } else {
    out += j.dump();
  }
}

}  // namespace

std::string dump_json(const OrderedJson& j) {
  std::string out;
  emit(j, 0, out);
  return out + "\n";
}

JsonReader::JsonReader(const Json& value, std::string file, std::string path)
    : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

void JsonReader::fail(const std::string& what) const {
  throw UserError(file_, path_.empty() ? "(top level)" : path_, what);
}

void JsonReader::expect_format(std::string_view kind) const {
  const std::string want = fmt::format("ucplan-{}/1", kind);
  if (!value_->is_object())
    fail(fmt::format("expected a ucplan {} (an object with \"format\": \"{}\"), got {}", kind, want,
                     json_type_name(*value_)));
  if (!has("format"))
    throw UserError(file_, "format",
                    fmt::format("required field is missing: a ucplan {} has \"format\": \"{}\"", kind, want));
  const std::string got = at("format").string();
  if (got == want) return;
  for (const char* other : {"network", "profile", "plan"}) {
    const std::string prefix = fmt::format("ucplan-{}/", other);
    if (got.rfind(prefix, 0) != 0) continue;
    if (prefix == fmt::format("ucplan-{}/", kind))
      at("format").fail(fmt::format("unsupported version \"{}\" (this ucplan reads {})", got, want));
    at("format").fail(
        fmt::format("this file is a {} (\"{}\"), but a {} (\"{}\") is needed here", other, got, kind, want));
  }
  at("format").fail(fmt::format("expected \"{}\", got \"{}\"", want, got));
}

bool JsonReader::has(std::string_view key) const { return value_->is_object() && value_->contains(std::string(key)); }

JsonReader JsonReader::at(std::string_view key) const {
  if (!value_->is_object()) fail("expected an object, got " + json_type_name(*value_));
  auto it = value_->find(std::string(key));
  std::string sub = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (it == value_->end()) throw UserError(file_, sub, "required field is missing");
  return JsonReader(*it, file_, sub);
}

std::optional<JsonReader> JsonReader::find(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return at(key);
}

void JsonReader::allow_only(std::initializer_list<std::string_view> allowed) const {
  if (!value_->is_object()) fail("expected an object, got " + json_type_name(*value_));
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    bool ok = false;
    for (auto a : allowed) ok = ok || it.key() == a;
    if (!ok) {
      std::string sub = path_.empty() ? it.key() : path_ + "." + it.key();
      throw UserError(file_, sub, "unknown field");
    }
  }
}

std::string JsonReader::string() const {
  if (!value_->is_string()) fail("expected a string, got " + json_type_name(*value_));
  return value_->get<std::string>();
}

bool JsonReader::boolean() const {
  if (!value_->is_boolean()) fail("expected true or false, got " + json_type_name(*value_));
  return value_->get<bool>();
}

double JsonReader::number() const {
  if (!value_->is_number()) fail("expected a number, got " + json_type_name(*value_));
  return value_->get<double>();
}

std::int64_t JsonReader::integer(std::int64_t min, std::int64_t max) const {
  // Every conversion is range-checked first: a double outside int64 (or 2^64-1 as an unsigned)
  // must not reach a cast, where it is undefined behaviour or wraps to a negative number.
  auto out_of_range = [&]() {
    const bool large = value_->is_number_unsigned() || value_->get<double>() > 0;
    if (max == INT64_MAX && large) fail(fmt::format("must be at most {} (64 bits), got {}", max, value_->dump()));
    if (max == INT64_MAX) fail(fmt::format("must be at least {}, got {}", min, value_->dump()));
    fail(fmt::format("must be between {} and {}, got {}", min, max, value_->dump()));
  };
  std::int64_t v = 0;
  if (value_->is_number_float()) {
    const double d = value_->get<double>();
    if (!(d >= -0x1p63 && d < 0x1p63)) out_of_range();
    if (d != std::trunc(d)) fail("expected an integer, got " + json_type_name(*value_));
    v = static_cast<std::int64_t>(d);
  } else if (value_->is_number_unsigned()) {
    const std::uint64_t u = value_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) out_of_range();
    v = static_cast<std::int64_t>(u);
  } else if (value_->is_number_integer()) {
    v = value_->get<std::int64_t>();
  } else {
    fail("expected an integer, got " + json_type_name(*value_));
  }
  if (v < min || v > max) {
    if (max == INT64_MAX) fail(fmt::format("must be at least {}, got {}", min, v));
    fail(fmt::format("must be between {} and {}, got {}", min, max, v));
  }
  return v;
}

std::vector<JsonReader> JsonReader::array() const {
  if (!value_->is_array()) fail("expected an array, got " + json_type_name(*value_));
  std::vector<JsonReader> out;
  out.reserve(value_->size());
  for (std::size_t i = 0; i < value_->size(); ++i)
    out.emplace_back((*value_)[i], file_, fmt::format("{}[{}]", path_, i));
  return out;
}

std::vector<JsonReader> JsonReader::array(std::size_t min_size, std::size_t max_size) const {
  auto out = array();
  if (out.size() < min_size || out.size() > max_size) {
    if (min_size == max_size) fail(fmt::format("expected {} elements, got {}", min_size, out.size()));
    fail(fmt::format("expected {} to {} elements, got {}", min_size, max_size, out.size()));
  }
  return out;
}

std::string JsonReader::string_or(std::string_view key, std::string fallback) const {
  auto f = find(key);
  return f ? f->string() : fallback;
}
bool JsonReader::boolean_or(std::string_view key, bool fallback) const {
  auto f = find(key);
  return f ? f->boolean() : fallback;
}
double JsonReader::number_or(std::string_view key, double fallback) const {
  auto f = find(key);
  return f ? f->number() : fallback;
}
std::int64_t JsonReader::integer_or(std::string_view key, std::int64_t fallback, std::int64_t min,
                                    std::int64_t max) const {
  auto f = find(key);
  return f ? f->integer(min, max) : fallback;
}

}  // namespace ucplan
