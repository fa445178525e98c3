// MetricsRegistry: a daemon's metrics (counters, gauges, histograms, with labels) and the
// plain HTTP endpoint that serves them to Prometheus at `/metrics` in its text format
// (`--metrics_address`). The only class that knows prometheus-cpp: the rest of Lockstep
// holds Counter, Gauge and Histogram handles, which cost an atomic add per update.
//
// Names and labels are the caller's constants (a name must match Prometheus'
// [a-zA-Z_:][a-zA-Z0-9_:]*); one name always names one kind of metric. Adding the same name
// and labels twice returns the same series. A name that Prometheus refuses, or a name used
// for two kinds, is logged and yields a handle that counts nothing: metrics never stop a
// daemon.
//
// OnCollect callbacks run before every scrape (and TextFormat()), in the order they were
// added: they set gauges computed from state (tasks by state, heartbeat ages), so nothing
// polls between scrapes.
//
// Ownership: owns the series and the HTTP server (stopped by the destructor); handles point
// into the registry and must not outlive it. Thread model: thread-safe; handles may be used
// from any thread; callbacks run on the HTTP server's threads.
#ifndef LOCKSTEP_COMMON_METRICS_H_
#define LOCKSTEP_COMMON_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace prometheus {
class Counter;
class Exposer;
template <typename T>
class Family;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace lockstep {

using MetricLabels = std::map<std::string, std::string>;

// A monotonically increasing count. Default-constructed: counts nothing.
class Counter {
 public:
  Counter() = default;
  void Increment(double by = 1) const;

 private:
  friend class MetricsRegistry;
  explicit Counter(prometheus::Counter* c) : c_(c) {}
  prometheus::Counter* c_ = nullptr;
};

// A value that goes up and down. Default-constructed: records nothing.
class Gauge {
 public:
  Gauge() = default;
  void Set(double value) const;

 private:
  friend class MetricsRegistry;
  Gauge(prometheus::Family<prometheus::Gauge>* family, prometheus::Gauge* g)
      : family_(family), g_(g) {}
  prometheus::Family<prometheus::Gauge>* family_ = nullptr;
  prometheus::Gauge* g_ = nullptr;
};

// Observations counted into buckets (upper bounds, increasing), with their sum and count.
// Default-constructed: records nothing.
class Histogram {
 public:
  Histogram() = default;
  void Observe(double value) const;

 private:
  friend class MetricsRegistry;
  explicit Histogram(prometheus::Histogram* h) : h_(h) {}
  prometheus::Histogram* h_ = nullptr;
};

// Bucket bounds `start`, start*factor, ... (`count` of them).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter AddCounter(const std::string& name, const std::string& help,
                     const MetricLabels& labels = {});
  Gauge AddGauge(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Histogram AddHistogram(const std::string& name, const std::string& help,
                         const std::vector<double>& buckets, const MetricLabels& labels = {});
  // Drops a gauge's series (a task that is gone); the handle must not be used after.
  void Remove(const Gauge& gauge);
  // Returns an id for RemoveOnCollect.
  int OnCollect(std::function<void()> refresh);
  // Removes a callback; once it returns, the callback is not running and never runs again
  // (its owner may go).
  void RemoveOnCollect(int id);

  // Serves `/metrics` over plain HTTP on `address` ("HOST:PORT"; port 0: any free port, read
  // back with port()). INVALID_ARGUMENT for an address that is not HOST:PORT, UNAVAILABLE
  // when it cannot be bound, FAILED_PRECONDITION when already serving.
  absl::Status Serve(const std::string& address);
  // The bound port; 0 before Serve().
  int port() const;

  // Every series in Prometheus' text format, as a scrape sees it.
  std::string TextFormat();

 private:
  class Refresher;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Refresher> refresher_;
  mutable absl::Mutex mu_;
  std::unique_ptr<prometheus::Exposer> exposer_ ABSL_GUARDED_BY(mu_);
  int port_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_METRICS_H_
