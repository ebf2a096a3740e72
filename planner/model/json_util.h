// JSON reading with the place of every value known, so that a bad value becomes one UserError
// line "FILE: JSON.PATH: what is wrong". Internal to the model library and its users' .cpp files:
// it includes nlohmann/json, which is heavy, so no widely included header may include this one.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ucplan {

using Json = nlohmann::json;
// Object keys kept in insertion order, so that what we write is ordered as we build it.
using OrderedJson = nlohmann::ordered_json;

// A whole file's bytes; UserError naming it when it is a folder ("is a folder, not a WHAT"), cannot
// be read ("cannot read the file (No such file or directory)") or holds more than kMaxInputBytes
// (a device such as /dev/zero never ends), an empty name as "".
constexpr std::int64_t kMaxInputBytes = std::int64_t{1} << 31;
std::string read_file_bytes(const std::string& path, std::string_view what = "file");

// Reads and parses a JSON file; a syntax error names the line and column.
Json load_json_file(const std::string& path);

// Writes text to path atomically (temporary file in the same folder, then rename), so that a
// failure never leaves a half-written file. Throws UserError when the folder is not writable.
// A symbolic link is followed (the file it names is replaced, the link stays); a path that is
// not a regular file, such as /dev/null or a pipe, is written directly (there is nothing to
// replace).
void write_file_atomically(const std::string& path, const std::string& text);
// Several outputs of one command: all written, or none (each path is checked before any is
// written, and every file is renamed into place only when all were written). Two outputs naming
// the same file are refused. A rename that fails after others succeeded (the folder changed while
// the command ran) cannot undo them: its message names the outputs already written.
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);
// Throws the UserError a write to path would give (a folder, a missing folder, not writable).
void check_output_path(const std::string& path);

// Whether two paths name the same file: equivalent when both exist, else the same path once made
// absolute and normal (symbolic links resolved as far as they exist).
bool same_file(const std::string& a, const std::string& b);

// How an output written to `output` names the input `file`: its path from the folder the output
// lands in (a symbolic link followed, as write_files_atomically follows it), or from the current
// folder where there is no output file (none given, or a device such as /dev/null); both made
// absolute and their symbolic links resolved, so that "p.json", "./p.json", an absolute path or a
// link to the file give the same bytes. The absolute path where no relative one exists.
std::string path_from_output(const std::string& file, const std::string& output);

// A command's file argument, with the option that gave it ("-o", "--trace", "the plan").
struct FileArgument {
  std::string option;
  std::string path;
};
// Every output checked before the command does any work (check_output_path), then told apart from
// every other output and from every input: writing over an input would destroy it, and two
// outputs in one file would leave only the last. UserError "PATH: OPTION: is also ...". Empty
// paths (an output not asked for) are skipped.
void check_outputs(const std::vector<FileArgument>& outputs, const std::vector<FileArgument>& inputs = {});

// Deterministic text of a JSON document: keys in insertion order, one key per line, arrays of
// objects one element per line (so plans and profiles diff line by line), a final newline.
// Floating-point values are written in the shortest form that reads back exactly.
std::string dump_json(const OrderedJson& j);

class JsonReader {
 public:
  JsonReader(const Json& value, std::string file, std::string path);

  [[noreturn]] void fail(const std::string& what) const;
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  const Json& raw() const { return *value_; }

  // The top-level "format" field, checked before anything else: "ucplan-KIND/1". A file of
  // another kind says what it is and what is needed instead of failing on its first field.
  void expect_format(std::string_view kind) const;

  bool has(std::string_view key) const;
  JsonReader at(std::string_view key) const;  // required field
  std::optional<JsonReader> find(std::string_view key) const;
  // Refuses any key not in `allowed`, naming it (catches typos such as "kernal").
  void allow_only(std::initializer_list<std::string_view> allowed) const;

  bool is_array() const { return value_->is_array(); }
  bool is_number() const { return value_->is_number(); }
  std::string string() const;
  bool boolean() const;
  double number() const;
  std::int64_t integer(std::int64_t min, std::int64_t max) const;
  std::vector<JsonReader> array() const;
  std::vector<JsonReader> array(std::size_t min_size, std::size_t max_size) const;

  // Convenience for optional fields with defaults.
  std::string string_or(std::string_view key, std::string fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  double number_or(std::string_view key, double fallback) const;
  std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t min, std::int64_t max) const;

 private:
  const Json* value_;
  std::string file_, path_;
};

std::string json_type_name(const Json& j);

}  // namespace ucplan
