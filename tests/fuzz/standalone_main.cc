// A stand-in for libFuzzer's driver, linked into fuzz targets when the compiler has no
// -fsanitize=fuzzer (gcc). See README.md.
//
//   <target>_fuzz [-runs=N] [-seed=S] <file or directory>...
//
// Calls LLVMFuzzerTestOneInput on every file given (directories are read one level deep, in
// name order), then on N (default 5000) pseudo-random mutations of them: bit flips, byte
// overwrites with boundary values, 16/32-bit big-endian boundary values, insertions,
// deletions, truncations, extensions and splices of two seeds. The generator is seeded with
// S (default 1), so a run is reproducible. Other -flags (libFuzzer's) are accepted and
// ignored, so one command line works for both drivers.
//
// When the target crashes (abort, a signal, or a sanitizer report), the input being run is
// written to ./crash-standalone, so it can be replayed by passing that file. Single-threaded.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Provided by the sanitizer runtimes when linked in; lets us save the input on a report.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

using Bytes = std::vector<uint8_t>;

// The input being run, for the crash handlers (which may only use async-signal-safe calls).
const uint8_t* g_current_data = nullptr;
size_t g_current_size = 0;
const char kCrashFile[] = "crash-standalone";

void SaveCurrentInput() {
  if (g_current_data == nullptr) return;
  const int fd = open(kCrashFile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current_size) {
    const ssize_t n = write(fd, g_current_data + done, g_current_size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  static const char kMsg[] = "standalone fuzz driver: crashing input saved to crash-standalone\n";
  (void)!write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  g_current_data = nullptr;  // save once
}

void OnFatalSignal(int sig) {
  SaveCurrentInput();
  signal(sig, SIG_DFL);
  raise(sig);
}

// splitmix64: small, fast, and the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n) for n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

constexpr uint8_t kBoundaryBytes[] = {0x00, 0x01, 0x05, 0x06, 0x07, 0x08, 0x10,
                                      0x16, 0x18, 0x20, 0x7F, 0x80, 0xFE, 0xFF};
constexpr uint32_t kBoundaryWords[] = {0,          1,          0x7FFFFFFF, 0x80000000,
                                       0xFFFFFFFF, 0xFFFFFFFE, 1u << 30,   (1u << 30) + 1,
                                       0xFFFFFF00, 100,        0x484F4D41, 65535};

void Mutate(Bytes* b, const std::vector<Bytes>& seeds, Rng* rng) {
  const size_t ops = 1 + rng->Below(4);
  for (size_t i = 0; i < ops; ++i) {
    switch (rng->Below(9)) {
      case 0:  // flip a bit
        if (!b->empty()) (*b)[rng->Below(b->size())] ^= static_cast<uint8_t>(1u << rng->Below(8));
        break;
      case 1:  // random byte
        if (!b->empty()) (*b)[rng->Below(b->size())] = static_cast<uint8_t>(rng->Next());
        break;
      case 2:  // boundary byte
        if (!b->empty()) {
          (*b)[rng->Below(b->size())] = kBoundaryBytes[rng->Below(std::size(kBoundaryBytes))];
        }
        break;
      case 3:  // boundary 32- or 16-bit value, big-endian like the wire
        if (b->size() >= 4) {
          const uint32_t v = kBoundaryWords[rng->Below(std::size(kBoundaryWords))];
          const bool wide = rng->Below(2) == 0;
          const size_t at = rng->Below(b->size() - 3);
          if (wide) {
            for (int k = 0; k < 4; ++k) (*b)[at + k] = static_cast<uint8_t>(v >> (24 - 8 * k));
          } else {
            (*b)[at] = static_cast<uint8_t>(v >> 8);
            (*b)[at + 1] = static_cast<uint8_t>(v);
          }
        }
        break;
      case 4:  // insert bytes
        b->insert(b->begin() + static_cast<ptrdiff_t>(rng->Below(b->size() + 1)), 1 + rng->Below(8),
                  static_cast<uint8_t>(rng->Next()));
        break;
      case 5:  // erase bytes
        if (!b->empty()) {
          const size_t at = rng->Below(b->size());
          const size_t n = std::min(b->size() - at, 1 + rng->Below(8));
          b->erase(b->begin() + static_cast<ptrdiff_t>(at),
                   b->begin() + static_cast<ptrdiff_t>(at + n));
        }
        break;
      case 6:  // truncate
        b->resize(rng->Below(b->size() + 1));
        break;
      case 7:  // extend with random bytes
        for (size_t n = 1 + rng->Below(64); n > 0; --n) {
          b->push_back(static_cast<uint8_t>(rng->Next()));
        }
        break;
      case 8: {  // splice: our head, another seed's tail
        const Bytes& other = seeds[rng->Below(seeds.size())];
        const size_t keep = rng->Below(b->size() + 1);
        const size_t from = rng->Below(other.size() + 1);
        b->resize(keep);
        b->insert(b->end(), other.begin() + static_cast<ptrdiff_t>(from), other.end());
        break;
      }
    }
  }
}

bool ReadFile(const std::filesystem::path& path, Bytes* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

void Run(const Bytes& input) {
  // A fresh heap copy of exactly the input's size, so ASan sees any read past its end.
  uint8_t* copy = static_cast<uint8_t*>(std::malloc(input.size() ? input.size() : 1));
  if (!input.empty()) std::memcpy(copy, input.data(), input.size());
  g_current_data = copy;
  g_current_size = input.size();
  LLVMFuzzerTestOneInput(copy, input.size());
  g_current_data = nullptr;
  std::free(copy);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 5000;
  uint64_t seed = 1;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) {
      runs = std::strtoull(arg.c_str() + 6, nullptr, 10);
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 6, nullptr, 10);
    } else if (!arg.empty() && arg[0] == '-') {
      // A libFuzzer flag: meaningless here.
    } else if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> in_dir;
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) in_dir.push_back(entry.path());
      }
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.emplace_back(arg);
    }
  }

  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnFatalSignal);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(SaveCurrentInput);

  std::vector<Bytes> seeds;
  for (const auto& path : files) {
    Bytes bytes;
    if (!ReadFile(path, &bytes)) {
      std::fprintf(stderr, "standalone fuzz driver: cannot read %s\n", path.c_str());
      return 2;
    }
    std::fprintf(stderr, "standalone fuzz driver: seed %s (%zu bytes)\n", path.c_str(),
                 bytes.size());
    Run(bytes);
    seeds.push_back(std::move(bytes));
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "standalone fuzz driver: no seeds given; mutating an empty input\n");
    seeds.emplace_back();
  }

  Rng rng(seed);
  for (uint64_t i = 0; i < runs; ++i) {
    Bytes mutant = seeds[i % seeds.size()];
    Mutate(&mutant, seeds, &rng);
    Run(mutant);
  }
  std::fprintf(stderr,
               "standalone fuzz driver: %zu seeds and %llu mutations (seed %llu) ran without a "
               "crash\n",
               seeds.size(), static_cast<unsigned long long>(runs),
               static_cast<unsigned long long>(seed));
  return 0;
}
