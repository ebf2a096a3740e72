// A one-line status on stderr for the commands that can take a minute (compile, above all in
// exact mode; frontier): what is being done, and the time since the command began, redrawn every
// second and erased when the command is done. Nothing at all unless stderr is a terminal, so
// pipes, files and tests see the same output as before.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace ucplan {

class ProgressLine {
 public:
  ProgressLine() : enabled_(::isatty(2) != 0) {
    if (enabled_) ticker_ = std::thread([this] { tick(); });
  }
  ~ProgressLine() { done(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Shows `text` from now on (thread-safe).
  void show(std::string text) {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    text_ = std::move(text);
    draw();
  }
  // Erases the line until the next show(): before printing to stdout on the same terminal.
  void clear() {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!text_.empty()) std::fputs("\r\033[K", stderr);
    text_.clear();
  }
  // Erases the line for good and stops the redrawing.
  void done() {
    if (!enabled_) return;
    clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }

 private:
  void draw() {  // mutex_ held
    if (text_.empty()) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string seconds = "  (" + std::to_string(std::llround(elapsed)) + " s)";
    // Within the terminal's width: a line that wraps is not erased by \r\033[K, and its first rows
    // would stay on the screen. Bytes count at least as many columns as they fill.
    std::string text = text_;
    winsize size{};
    if (::ioctl(2, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
      const std::size_t columns = size.ws_col;
      const std::size_t room = columns > seconds.size() + 4 ? columns - 1 - seconds.size() : 3;
      if (text.size() > room) text = text.substr(0, room - 3) + "...";
    }
    std::fprintf(stderr, "\r\033[K%s%s", text.c_str(), seconds.c_str());
    std::fflush(stderr);
  }
  void tick() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) draw();
  }

  const bool enabled_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string text_;
  bool stop_ = false;
  std::thread ticker_;
};

}  // namespace ucplan
