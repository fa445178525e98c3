#include "common/metrics.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "spdlog/spdlog.h"

namespace lockstep {

// Runs the OnCollect callbacks; registered with the HTTP server before the registry, so that
// every scrape sees the values they set.
class MetricsRegistry::Refresher : public prometheus::Collectable {
 public:
  int Add(std::function<void()> refresh) {
    absl::MutexLock l(&mu_);
    refreshers_.emplace(next_id_, std::move(refresh));
    return next_id_++;
  }
  // Waits for a running callback: they run under mu_.
  void Remove(int id) {
    absl::MutexLock l(&mu_);
    refreshers_.erase(id);
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    absl::MutexLock l(&mu_);
    for (const auto& [id, refresh] : refreshers_) refresh();
    return {};
  }

 private:
  mutable absl::Mutex mu_;
  std::map<int, std::function<void()>> refreshers_ ABSL_GUARDED_BY(mu_);  // in the order added
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

void Counter::Increment(double by) const {
  if (c_ != nullptr) c_->Increment(by);
}

void Gauge::Set(double value) const {
  if (g_ != nullptr) g_->Set(value);
}

void Histogram::Observe(double value) const {
  if (h_ != nullptr) h_->Observe(value);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

MetricsRegistry::MetricsRegistry()
    : registry_(std::make_shared<prometheus::Registry>()),
      refresher_(std::make_shared<Refresher>()) {}

MetricsRegistry::~MetricsRegistry() {
  absl::MutexLock l(&mu_);
  exposer_.reset();  // stops the HTTP server before the series go
}

// prometheus-cpp throws for a name it refuses or one registered as another kind; the
// handle then counts nothing (see the header).
Counter MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                    const MetricLabels& labels) {
  try {
    return Counter(
        &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add(labels));
  } catch (const std::exception& e) {
    spdlog::error("metrics: counter {}: {}", name, e.what());
    return Counter();
  }
}

Gauge MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                const MetricLabels& labels) {
  try {
    prometheus::Family<prometheus::Gauge>& family =
        prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
    return Gauge(&family, &family.Add(labels));
  } catch (const std::exception& e) {
    spdlog::error("metrics: gauge {}: {}", name, e.what());
    return Gauge();
  }
}

Histogram MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                        const std::vector<double>& buckets,
                                        const MetricLabels& labels) {
  try {
    return Histogram(&prometheus::BuildHistogram()
                          .Name(name)
                          .Help(help)
                          .Register(*registry_)
                          .Add(labels, buckets));
  } catch (const std::exception& e) {
    spdlog::error("metrics: histogram {}: {}", name, e.what());
    return Histogram();
  }
}

void MetricsRegistry::Remove(const Gauge& gauge) {
  if (gauge.family_ != nullptr) gauge.family_->Remove(gauge.g_);
}

int MetricsRegistry::OnCollect(std::function<void()> refresh) {
  return refresher_->Add(std::move(refresh));
}

void MetricsRegistry::RemoveOnCollect(int id) { refresher_->Remove(id); }

absl::Status MetricsRegistry::Serve(const std::string& address) {
  LS_ASSIGN_OR_RETURN(const HostPort listen, ParseListenAddress(address, "--metrics_address"));
  absl::MutexLock l(&mu_);
  if (exposer_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics are already served on port ", port_));
  }
  const std::string bind = listen.ToString();
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/1);
    exposer->RegisterCollectable(refresher_);
    exposer->RegisterCollectable(registry_);
    const std::vector<int> ports = exposer->GetListeningPorts();
    if (ports.empty() || ports.front() <= 0) {
      return absl::UnavailableError(
          absl::StrCat("--metrics_address ", bind, ": no port was bound"));
    }
    port_ = ports.front();
    exposer_ = std::move(exposer);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("--metrics_address ", bind, ": cannot listen (",
                                               e.what(), "); is the port in use?"));
  }
  return absl::OkStatus();
}

int MetricsRegistry::port() const {
  absl::MutexLock l(&mu_);
  return port_;
}

std::string MetricsRegistry::TextFormat() {
  refresher_->Collect();
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace lockstep
