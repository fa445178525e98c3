#include "collectives/bench/allreduce_bench.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collectives/bench/allreduce_peers.h"
#include "collectives/bench/allreduce_rank.h"
#include "collectives/bench/core_latency.h"
#include "collectives/bench/peer_measurement.h"
#include "common/child_processes.h"
#include "common/sched.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace bench {
namespace {

struct BenchFlags {
  int np = 2;
  std::string transport = "shm";
  std::string sizes = "8:64M";
  int iters = 1000;
  std::string peers = "all";
  std::string peers_dir;
  std::string algorithm = "auto";
  bool fusion = true;
  double target_s = 0.25;
  int shm_spin = -1;
  int shm_yield = -1;
  size_t shm_cma_bytes = 0;
  bool shm_heap = true;
  size_t shm_direct_bytes = 0;
  size_t shm_ring_bytes = 0;
  std::string tcp_congestion = "-";  // "-": TcpOptions' default
  size_t chunk_bytes = 0;
  size_t ring_threshold_bytes = 0;
  size_t doubling_threshold_bytes = 0;
  size_t segment_bytes = 0;
  std::string bind = "auto";  // auto: bind for shm only (measured: it hurts loopback TCP)
  int tcp_buffer_bytes = -1;
  int tcp_busy_polls = -1;
  int64_t tcp_send_window_bytes = -1;
  bool encrypt = false;
  size_t bytes_per_pack = 4 << 20;
  int rounds = 1;
  // size: each size runs ours and every peer back to back (seconds apart, so that a slow
  // spell of the machine hits all of them alike); sweep: ours over every size, then each
  // peer over every size.
  std::string interleave = "size";
  std::string json_out;  // every round's rows, one JSON object per line
};

constexpr char kUsage[] =
    R"(usage: lockstep bench allreduce --np=N --transport=tcp|shm [options]
Starts N local ranks, all-reduces float32 sums of every size in --sizes (in place), checks
every result, and prints an nccl-tests-style table per placement of the two CPUs, with the
ratio to Gloo and Open MPI measured in the same run. Flags take "--name=value" or
"--name value".
  --np=N                  ranks, 1..64 (default 2)
  --transport=tcp|shm     loopback TCP or shared memory (default shm)
  --sizes=MIN:MAX         sizes in bytes, doubling, K/M/G suffixes (default 8:64M)
  --iters=K               most calls per size (default 1000; fewer for large sizes)
  --target_s=S            time to aim for per size (default 0.25)
  --rounds=R              rounds of ours and every peer, 1..100 (default 1)
  --interleave=size|sweep size: every size runs ours and each peer back to back, so that
                          they meet the machine in the same state (default); sweep: ours
                          over all sizes, then each peer over all sizes
  --json_out=FILE         every sweep's rows, one JSON object per line
  --peers=all|none|mpi|gloo   which peers run (default all)
  --peers_dir=DIR         where the peer binaries are (default: beside this binary)
  --fusion=true|false     also time 100 x 40 KiB fused against separate calls (default true)
  --bytes_per_pack=B      fusion pack size (default 4194304)
  --algorithm=auto|ring|hd|rd   force one all-reduce algorithm (default auto)
  --chunk_bytes=B, --ring_threshold_bytes=B, --doubling_threshold_bytes=B,
  --segment_bytes=B       AlgorithmOptions overrides
  --bind=auto|true|false  pin rank r to CPU r mod cores (auto: for shm only)
  --tcp_buffer_bytes=B, --tcp_busy_polls=N, --tcp_congestion=NAME,
  --tcp_send_window_bytes=B   TcpOptions overrides
  --encrypt[=true|false]  TCP: encrypt and authenticate the traffic (AES-256-GCM, as a job's
                          communication.encrypt); the peers stay in plaintext
  --shm_spin=N, --shm_yield=N, --shm_ring_bytes=B, --shm_heap=true|false,
  --shm_direct_bytes=B, --shm_cma_bytes=B   ShmOptions overrides
)";

absl::StatusOr<BenchFlags> ParseFlags(int argc, char** argv) {
  BenchFlags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return absl::InvalidArgumentError("unexpected argument " + arg);
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name == "encrypt" &&
               (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0)) {
      value = "true";  // a bare switch
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError("--" + name + " needs a value");
    }
    bool ok = true;
    if (name == "np") {
      ok = absl::SimpleAtoi(value, &f.np) && f.np >= 1 && f.np <= 64;
    } else if (name == "transport") {
      f.transport = value;
      ok = value == "tcp" || value == "shm";
    } else if (name == "sizes") {
      f.sizes = value;
    } else if (name == "iters") {
      ok = absl::SimpleAtoi(value, &f.iters) && f.iters >= 1;
    } else if (name == "peers") {
      f.peers = value;
      ok = value == "all" || value == "none" || value == "mpi" || value == "gloo";
    } else if (name == "peers_dir") {
      f.peers_dir = value;
    } else if (name == "algorithm") {
      f.algorithm = value;
      ok = value == "auto" || value == "ring" || value == "hd" || value == "rd";
    } else if (name == "rounds") {
      ok = absl::SimpleAtoi(value, &f.rounds) && f.rounds >= 1 && f.rounds <= 100;
    } else if (name == "json_out") {
      f.json_out = value;
    } else if (name == "interleave") {
      f.interleave = value;
      ok = value == "size" || value == "sweep";
    } else if (name == "fusion") {
      ok = absl::SimpleAtob(value, &f.fusion);
    } else if (name == "target_s") {
      ok = absl::SimpleAtod(value, &f.target_s) && f.target_s > 0;
    } else if (name == "tcp_buffer_bytes") {
      ok = absl::SimpleAtoi(value, &f.tcp_buffer_bytes);
    } else if (name == "bytes_per_pack") {
      ok = absl::SimpleAtoi(value, &f.bytes_per_pack) && f.bytes_per_pack > 0;
    } else if (name == "tcp_busy_polls") {
      ok = absl::SimpleAtoi(value, &f.tcp_busy_polls);
    } else if (name == "encrypt") {
      ok = value == "true" || value == "false";
      f.encrypt = value == "true";
    } else if (name == "tcp_send_window_bytes") {
      ok = absl::SimpleAtoi(value, &f.tcp_send_window_bytes) && f.tcp_send_window_bytes >= 0;
    } else if (name == "bind") {
      f.bind = value;
      ok = value == "auto" || value == "true" || value == "false";
    } else if (name == "shm_spin") {
      ok = absl::SimpleAtoi(value, &f.shm_spin);
    } else if (name == "tcp_congestion") {
      f.tcp_congestion = value;
    } else if (name == "shm_ring_bytes") {
      ok = absl::SimpleAtoi(value, &f.shm_ring_bytes) && f.shm_ring_bytes % 64 == 0;
    } else if (name == "shm_heap") {
      ok = value == "true" || value == "false";
      f.shm_heap = value == "true";
    } else if (name == "shm_direct_bytes") {
      ok = absl::SimpleAtoi(value, &f.shm_direct_bytes);
    } else if (name == "shm_cma_bytes") {
      ok = absl::SimpleAtoi(value, &f.shm_cma_bytes);
    } else if (name == "shm_yield") {
      ok = absl::SimpleAtoi(value, &f.shm_yield);
    } else if (name == "chunk_bytes") {
      ok = absl::SimpleAtoi(value, &f.chunk_bytes);
    } else if (name == "ring_threshold_bytes") {
      ok = absl::SimpleAtoi(value, &f.ring_threshold_bytes);
    } else if (name == "doubling_threshold_bytes") {
      ok = absl::SimpleAtoi(value, &f.doubling_threshold_bytes);
    } else if (name == "segment_bytes") {
      ok = absl::SimpleAtoi(value, &f.segment_bytes);
    } else {
      return absl::InvalidArgumentError("unknown flag --" + name);
    }
    if (!ok) return absl::InvalidArgumentError("bad value '" + value + "' for --" + name);
  }
  return f;
}

// Forks the ranks, waits for them, and returns rank 0's JSON lines.
absl::StatusOr<std::vector<nlohmann::json>> RunRanks(const BenchFlags& f,
                                                     const std::vector<uint64_t>& sizes) {
  char tmpl[] = "/tmp/lockstep-bench-allreduce.XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (dir == nullptr) return absl::InternalError("mkdtemp failed in /tmp");
  absl::BitGen gen;
  RankConfig c;
  c.np = f.np;
  c.transport =
      f.transport == "tcp" ? collectives::TransportKind::kTcp : collectives::TransportKind::kShm;
  c.algorithm = f.algorithm == "ring" ? collectives::AllReduceAlgorithm::kRing
                : f.algorithm == "hd" ? collectives::AllReduceAlgorithm::kHalvingDoubling
                : f.algorithm == "rd" ? collectives::AllReduceAlgorithm::kRecursiveDoubling
                                      : collectives::AllReduceAlgorithm::kAuto;
  c.store_dir = dir;
  c.key_prefix = absl::StrFormat("bench-%d", getpid());
  c.secret =
      absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
  c.sizes = sizes;
  c.max_iters = f.iters;
  c.target_s = f.target_s;
  c.fusion = f.fusion;
  c.shm_spin = f.shm_spin;
  c.tcp_buffer_bytes = f.tcp_buffer_bytes;
  c.tcp_busy_polls = f.tcp_busy_polls;
  c.tcp_send_window_bytes = f.tcp_send_window_bytes;
  c.encrypt = f.encrypt;
  c.bytes_per_pack = f.bytes_per_pack;
  c.shm_yield = f.shm_yield;
  c.shm_cma_bytes = f.shm_cma_bytes;
  c.shm_heap = f.shm_heap && f.shm_cma_bytes == 0;
  c.shm_direct_bytes = f.shm_direct_bytes;
  c.shm_ring_bytes = f.shm_ring_bytes;
  c.tcp_congestion = f.tcp_congestion;
  c.chunk_bytes = f.chunk_bytes;
  c.ring_threshold_bytes = f.ring_threshold_bytes;
  c.doubling_threshold_bytes = f.doubling_threshold_bytes;
  c.segment_bytes = f.segment_bytes;
  c.results_path = absl::StrCat(dir, "/results.jsonl");
  absl::Status result;
  {
    ChildProcesses ranks;
    for (int r = 0; r < f.np && result.ok(); ++r) {
      result =
          ranks
              .Fork(absl::StrCat("rank ", r),
                    [&, r] {
                      c.rank = r;
                      if (f.bind == "true" || (f.bind == "auto" && f.transport == "shm")) {
                        // Like Open MPI's default binding (to core for np <= 2, to socket
                        // above): here one core per rank, round robin over the CPUs we
                        // may use, so two ranks never time-share a core by accident.
                        const std::vector<int> cpus = AllowedCpus();
                        if (!cpus.empty()) {
                          absl::Status pinned = SetCpuAffinity({cpus[r % cpus.size()]});
                          if (!pinned.ok()) {
                            std::fprintf(stderr, "rank %d: %s\n", r, pinned.ToString().c_str());
                          }
                        }
                      }
                      absl::Status s = RunBenchRank(c);
                      if (!s.ok()) std::fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
                      return s.ok() ? 0 : 1;
                    })
              .status();
    }
    // The first rank that fails stops the others (they would wait for their deadline).
    if (result.ok()) result = ranks.WaitAll(absl::InfiniteDuration());
  }  // Every rank is reaped here.
  std::vector<nlohmann::json> lines;
  std::ifstream in(c.results_path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) lines.push_back(j);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!result.ok()) return result;
  return lines;
}

std::string SizeName(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return absl::StrCat(b >> 20, "M");
  if (b >= 1024 && b % 1024 == 0) return absl::StrCat(b >> 10, "K");
  return absl::StrCat(b);
}

}  // namespace

absl::StatusOr<std::vector<uint64_t>> ParseSizes(const std::string& spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.size() != 2) return absl::InvalidArgumentError("--sizes is MIN:MAX, e.g. 8:64M");
  uint64_t v[2];
  for (int i = 0; i < 2; ++i) {
    std::string p = absl::AsciiStrToUpper(parts[i]);
    uint64_t mult = 1;
    if (!p.empty() && (p.back() == 'K' || p.back() == 'M' || p.back() == 'G')) {
      mult = p.back() == 'K' ? 1ull << 10 : p.back() == 'M' ? 1ull << 20 : 1ull << 30;
      p.pop_back();
    }
    if (!absl::SimpleAtoi(p, &v[i]) || v[i] == 0) {
      return absl::InvalidArgumentError("bad size '" + parts[i] + "'");
    }
    v[i] *= mult;
  }
  if (v[0] % 4 != 0 || v[0] > v[1]) {
    return absl::InvalidArgumentError("--sizes: MIN must be a multiple of 4 and <= MAX");
  }
  std::vector<uint64_t> sizes;
  for (uint64_t b = v[0]; b <= v[1]; b *= 2) sizes.push_back(b);
  return sizes;
}

namespace {

// One implementation's sweep: its median time per size, and the probes around it.
struct Sweep {
  std::string impl;
  Placement placement = Placement::kUnknown;
  std::map<uint64_t, double> p50;
  std::map<uint64_t, int> iters;
  bool correct = true;
  nlohmann::json fusion;  // ours only
};

}  // namespace

int RunAllreduceBench(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  auto flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "bench allreduce: %s (--help lists the flags)\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  const BenchFlags& f = *flags;
  auto sizes = ParseSizes(f.sizes);
  if (!sizes.ok()) {
    std::fprintf(stderr, "bench allreduce: %s\n", std::string(sizes.status().message()).c_str());
    return 2;
  }
  std::ofstream json_out;
  if (!f.json_out.empty()) {
    json_out.open(f.json_out);
    if (!json_out) {
      std::fprintf(stderr, "bench allreduce: --json_out: cannot write %s\n", f.json_out.c_str());
      return 2;
    }
  }
  // Rounds: ours and every peer once each per size (--interleave=size) or over every size
  // (sweep), one at a time, never concurrently. Every run is bracketed by the core-to-core
  // probe and filed under its placement; only runs of the same placement are compared.
  const std::string dir = f.peers_dir.empty() ? DefaultPeersDir() : f.peers_dir;
  const std::vector<PeerSpec> peers = PeersFor(f.transport, f.peers);
  const std::string ours_name = "lockstep_" + f.transport;
  std::vector<Sweep> sweeps;
  // A peer is left out after this many failed runs in a row (a missing binary, or a peer that
  // keeps failing); Gloo's ranks now and then lose their connection in a closing barrier, and
  // one such run must not drop Gloo from every later size.
  constexpr int kPeerFailuresInARow = 3;
  std::vector<int> peer_failures(peers.size(), 0);
  absl::StatusOr<CoreLatency> probe = MeasureCoreLatency();
  auto file = [&](Sweep sweep, int round, const absl::StatusOr<CoreLatency>& before) {
    const absl::StatusOr<CoreLatency> after = MeasureCoreLatency();
    sweep.placement = ClassifyPlacement(before, after);
    const std::string what = sweep.p50.size() == 1
                                 ? absl::StrCat(SizeName(sweep.p50.begin()->first), " ", sweep.impl)
                                 : sweep.impl;
    std::printf("# round %d %-30s %s -> %s: %s\n", round + 1, what.c_str(),
                before.ok() ? absl::StrFormat("%.0f ns", before->round_trip_ns).c_str() : "?",
                after.ok() ? absl::StrFormat("%.0f ns", after->round_trip_ns).c_str() : "?",
                PlacementName(sweep.placement));
    std::fflush(stdout);
    if (json_out.is_open()) {
      for (const auto& [bytes, p50] : sweep.p50) {
        json_out << nlohmann::json{{"round", round + 1},
                                   {"impl", sweep.impl},
                                   {"probe_ns_before", before.ok() ? before->round_trip_ns : -1.0},
                                   {"probe_ns_after", after.ok() ? after->round_trip_ns : -1.0},
                                   {"bytes", bytes},
                                   {"time_us_p50", p50}}
                        .dump()
                 << "\n";
      }
    }
    sweeps.push_back(std::move(sweep));
    probe = after;
  };
  if (!probe.ok() || MeasuredScheduling(*probe)) {
    std::printf("# %s\n", CoreLatencyLine(probe).c_str());
  }
  // Ours over `run_sizes` (with the fusion measurement when `fusion`), filed as one sweep.
  auto run_ours = [&](int round, const std::vector<uint64_t>& run_sizes, bool fusion) -> bool {
    const absl::StatusOr<CoreLatency> before = probe;
    BenchFlags run_flags = f;
    run_flags.fusion = fusion;
    auto lines = RunRanks(run_flags, run_sizes);
    if (!lines.ok()) {
      std::fprintf(stderr, "bench allreduce: %s\n", lines.status().ToString().c_str());
      return false;
    }
    Sweep sweep;
    sweep.impl = ours_name;
    for (const auto& j : *lines) {
      if (j.contains("fusion")) {
        sweep.fusion = j;
        sweep.correct &= j.value("correct", false);
        continue;
      }
      const uint64_t bytes = j["bytes"].get<uint64_t>();
      sweep.p50[bytes] = j["time_us_p50"].get<double>();
      sweep.iters[bytes] = j["iters"].get<int>();
      sweep.correct &= j["correct"].get<bool>();
    }
    file(std::move(sweep), round, before);
    return true;
  };
  // Every peer over `sizes_spec` ("MIN:MAX"), one after the other, never concurrently with
  // ours or each other.
  auto run_peers = [&](int round, const std::string& sizes_spec) {
    for (size_t k = 0; k < peers.size(); ++k) {
      if (peer_failures[k] >= kPeerFailuresInARow) continue;
      PeerSpec p = peers[k];
      p.args.insert(p.args.end(), {"--np", absl::StrCat(f.np), "--sizes", sizes_spec, "--iters",
                                   absl::StrCat(f.iters)});
      const absl::StatusOr<CoreLatency> before = probe;
      auto rows = RunPeer(dir, p, absl::Minutes(10));
      if (!rows.ok()) {
        const bool left_out = ++peer_failures[k] >= kPeerFailuresInARow;
        std::printf(
            "# peer %s: %s%s\n", p.impl.c_str(), std::string(rows.status().message()).c_str(),
            left_out
                ? absl::StrCat(" (", kPeerFailuresInARow, " failures in a row: left out)").c_str()
                : "");
        continue;
      }
      peer_failures[k] = 0;
      Sweep sweep;
      sweep.impl = p.impl;
      for (const auto& [bytes, row] : *rows) {
        sweep.p50[bytes] = row.time_us_p50;
        sweep.correct &= row.correct;
      }
      file(std::move(sweep), round, before);
    }
  };
  for (int round = 0; round < f.rounds; ++round) {
    if (f.interleave == "sweep") {
      // Even rounds run ours first, odd rounds the peers first.
      if (round % 2 == 1) run_peers(round, f.sizes);
      if (!run_ours(round, *sizes, f.fusion)) return 1;
      if (round % 2 == 0) run_peers(round, f.sizes);
      continue;
    }
    // By size: who goes first alternates from size to size and from round to round; the
    // fusion measurement rides with ours at the last size.
    for (size_t i = 0; i < sizes->size(); ++i) {
      const uint64_t bytes = (*sizes)[i];
      const std::string spec = absl::StrCat(bytes, ":", bytes);
      const bool peers_first = (round + i) % 2 == 1;
      if (peers_first) run_peers(round, spec);
      if (!run_ours(round, {bytes}, f.fusion && i + 1 == sizes->size())) return 1;
      if (!peers_first) run_peers(round, spec);
    }
  }

  const double bus = f.np > 1 ? 2.0 * (f.np - 1) / f.np : 1.0;
  std::printf("# lockstep allreduce: np=%d transport=%s algorithm=%s, float32 sum in place\n", f.np,
              f.transport.c_str(), f.algorithm.c_str());
  std::printf(
      "# time: median of K back-to-back calls on rank 0, then the median over the sweeps of one "
      "placement; GB/s = 1e9 B/s; ratio = peer time / our time (>1: we are faster)\n");
  std::printf("# interleaved by %s%s\n", f.interleave.c_str(),
              f.interleave == "size"
                  ? ": each size ran ours and every peer back to back, each run its own sweep"
                  : ": ours over every size, then each peer");
  bool all_correct = true;
  for (const Sweep& s : sweeps) {
    if (s.impl == ours_name) all_correct &= s.correct;
  }
  for (Placement placement :
       {Placement::kSharedL3, Placement::kSplit, Placement::kUnknown, Placement::kMixed}) {
    auto of = [&](const std::string& impl) {
      std::vector<const Sweep*> out;
      for (const Sweep& s : sweeps) {
        if (s.impl == impl && s.placement == placement) out.push_back(&s);
      }
      return out;
    };
    const std::vector<const Sweep*> ours = of(ours_name);
    if (ours.empty()) continue;
    std::vector<std::string> names;
    std::vector<std::vector<const Sweep*>> theirs;
    std::string counts = absl::StrCat("ours ", ours.size());
    for (const PeerSpec& p : peers) {
      std::vector<const Sweep*> t = of(p.impl);
      absl::StrAppend(&counts, ", ", p.impl, " ", t.size());
      names.push_back(p.impl);
      theirs.push_back(std::move(t));
    }
    std::printf("# %s; sweeps: %s\n", PlacementName(placement), counts.c_str());
    std::printf("%12s %6s %11s %10s %10s %4s", "bytes", "iters", "time_us", "algbw", "busbw", "ok");
    for (auto& n : names) std::printf(" %22s", ("x " + n).c_str());
    std::printf("\n");
    auto median_at = [](const std::vector<const Sweep*>& v, uint64_t bytes) {
      std::vector<double> t;
      for (const Sweep* s : v) {
        auto it = s->p50.find(bytes);
        if (it != s->p50.end() && it->second > 0) t.push_back(it->second);
      }
      return Median(t);
    };
    double worst = 1e30;
    uint64_t worst_at = 0;
    for (uint64_t bytes : *sizes) {
      const double p50 = median_at(ours, bytes);
      if (p50 <= 0) continue;  // interleaved by size: no run of ours at this size landed here
      int iters = 0;
      bool correct = true;
      for (const Sweep* s : ours) {
        iters = std::max(iters, s->iters.count(bytes) ? s->iters.at(bytes) : 0);
        correct &= s->correct;
      }
      const double algbw = p50 > 0 ? bytes / p50 / 1e3 : 0;
      std::printf("%12s %6d %11.2f %10.3f %10.3f %4s", SizeName(bytes).c_str(), iters, p50, algbw,
                  algbw * bus, correct ? "ok" : "BAD");
      for (const auto& t : theirs) {
        const double peer = median_at(t, bytes);
        if (peer <= 0 || p50 <= 0) {
          std::printf(" %22s", "-");
          continue;
        }
        // A peer whose result was wrong at this size is no yardstick: its time, no ratio.
        bool peer_correct = true;
        for (const Sweep* s : t) {
          if (s->p50.count(bytes) != 0) peer_correct &= s->correct;
        }
        if (!peer_correct) {
          std::printf(" %12.2fus %7s", peer, "WRONG");
          continue;
        }
        if (peer / p50 < worst) {
          worst = peer / p50;
          worst_at = bytes;
        }
        std::printf(" %12.2fus %7.2fx", peer, peer / p50);
      }
      std::printf("\n");
    }
    if (worst < 1e30) {
      std::printf("# worst ratio to the best peer: %.2fx at %s bytes\n", worst,
                  SizeName(worst_at).c_str());
    }
    std::vector<double> sep, sep_async, fus, fus_bf16, ratio, bf16_ratio;
    for (const Sweep* s : ours) {
      if (s->fusion.is_null()) continue;
      sep.push_back(s->fusion["separate_us_p50"].get<double>());
      sep_async.push_back(s->fusion["separate_async_us_p50"].get<double>());
      fus.push_back(s->fusion["fused_us_p50"].get<double>());
      ratio.push_back(fus.back() > 0 ? sep.back() / fus.back() : 0);
      fus_bf16.push_back(s->fusion.value("fused_bf16_us_p50", 0.0));
      bf16_ratio.push_back(fus_bf16.back() > 0 ? fus.back() / fus_bf16.back() : 0);
    }
    if (!fus.empty()) {
      const Sweep* with_fusion = *std::find_if(ours.begin(), ours.end(),
                                               [](const Sweep* s) { return !s->fusion.is_null(); });
      const nlohmann::json& j = with_fusion->fusion;
      std::printf(
          "# fusion: %d tensors of %d bytes, bytes_per_pack %d: separate %.1f us (async %.1f "
          "us), fused %.1f us: %.2fx (per sweep: %s), fused result %s\n",
          j["tensors"].get<int>(), j["tensor_bytes"].get<int>(), j["bytes_per_pack"].get<int>(),
          Median(sep), Median(sep_async), Median(fus), Median(ratio),
          absl::StrJoin(ratio, ", ",
                        [](std::string* out, double r) { absl::StrAppendFormat(out, "%.2fx", r); })
              .c_str(),
          j.value("correct", false) ? "ok" : "BAD");
      std::printf(
          "# fused with bf16 compression: %.1f us; fused f32 / bf16: %.2fx (per sweep: %s)\n",
          Median(fus_bf16), Median(bf16_ratio),
          absl::StrJoin(bf16_ratio, ", ", [](std::string* out, double r) {
            absl::StrAppendFormat(out, "%.2fx", r);
          }).c_str());
    }
  }
  return all_correct ? 0 : 1;
}

}  // namespace bench
}  // namespace lockstep
