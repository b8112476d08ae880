// system: Scenario and Registry bookkeeping (see system.h).
#include "tools/bench/system.h"

#include <cassert>
#include <utility>

#include "absl/strings/str_format.h"
#include "transport/config.h"

namespace homarpc::bench {

std::string DescribeHomarpcSettings(const RunSettings& settings) {
  const int64_t link_mbps = settings.link_mbps >= 0 ? settings.link_mbps
                                                    : int64_t{transport::Config().link_mbps};
  return absl::StrFormat(
      "io_backend=%s spin_us=%d mtu=%d link_mbps=%d pace_local=%d direct_send=%d",
      settings.io_backend, settings.spin_us, settings.mtu, link_mbps,
      settings.pace_local ? 1 : 0, settings.direct_send ? 1 : 0);
}

const System* Scenario::FindSystem(absl::string_view system_name) const {
  for (const auto& system : systems) {
    if (system->name() == system_name) return system.get();
  }
  return nullptr;
}

std::vector<std::string> Scenario::SystemNames() const {
  std::vector<std::string> names;
  for (const auto& system : systems) names.push_back(system->name());
  return names;
}

Scenario& Registry::AddScenario(absl::string_view name, absl::string_view description,
                                std::function<uint64_t(uint64_t size)> response_bytes) {
  assert(FindMutable(name) == nullptr);
  auto scenario = std::make_unique<Scenario>();
  scenario->name = std::string(name);
  scenario->description = std::string(description);
  scenario->response_bytes = std::move(response_bytes);
  scenarios_.push_back(std::move(scenario));
  return *scenarios_.back();
}

void Registry::AddSystem(absl::string_view scenario_name, std::unique_ptr<System> system) {
  Scenario* scenario = FindMutable(scenario_name);
  assert(scenario != nullptr);
  assert(scenario->FindSystem(system->name()) == nullptr);
  scenario->systems.push_back(std::move(system));
}

const Scenario* Registry::Find(absl::string_view name) const {
  for (const auto& scenario : scenarios_) {
    if (scenario->name == name) return scenario.get();
  }
  return nullptr;
}

Scenario* Registry::FindMutable(absl::string_view name) {
  for (const auto& scenario : scenarios_) {
    if (scenario->name == name) return scenario.get();
  }
  return nullptr;
}

std::vector<std::string> Registry::ScenarioNames() const {
  std::vector<std::string> names;
  for (const auto& scenario : scenarios_) names.push_back(scenario->name);
  return names;
}

}  // namespace homarpc::bench
