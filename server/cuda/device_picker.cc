#include "server/cuda/device_picker.h"

#include <algorithm>
#include <utility>

namespace primserve::cuda {

DevicePicker::DevicePicker(std::vector<int> devices) {
  absl::MutexLock lock(&mu_);
  for (int device : devices) loads_.push_back(Load{device});
}

DevicePicker::Load* DevicePicker::Find(int device) {
  for (Load& load : loads_) {
    if (load.device == device) return &load;
  }
  return nullptr;
}

const DevicePicker::Load* DevicePicker::Find(int device) const {
  for (const Load& load : loads_) {
    if (load.device == device) return &load;
  }
  return nullptr;
}

int DevicePicker::Claim(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  Load* best = nullptr;
  size_t best_index = 0;
  // Strictly less wins, so among equals the first from next_ on is taken.
  for (size_t k = 0; k < loads_.size(); ++k) {
    const size_t i = (next_ + k) % loads_.size();
    Load& load = loads_[i];
    if (!load.up) continue;
    if (best == nullptr || std::make_pair(load.bytes, load.batches) <
                               std::make_pair(best->bytes, best->batches)) {
      best = &load;
      best_index = i;
    }
  }
  if (best == nullptr) return -1;
  next_ = best_index + 1;
  best->bytes += bytes;
  ++best->batches;
  return best->device;
}

bool DevicePicker::ClaimOn(int device, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  Load* load = Find(device);
  if (load == nullptr || !load->up) return false;
  load->bytes += bytes;
  ++load->batches;
  return true;
}

void DevicePicker::Finish(int device, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  Load* load = Find(device);
  if (load == nullptr) return;
  load->bytes -= std::min(load->bytes, bytes);
  if (load->batches > 0) --load->batches;
}

void DevicePicker::MarkDown(int device) {
  absl::MutexLock lock(&mu_);
  if (Load* load = Find(device)) load->up = false;
}

bool DevicePicker::up(int device) const {
  absl::MutexLock lock(&mu_);
  const Load* load = Find(device);
  return load != nullptr && load->up;
}

uint64_t DevicePicker::bytes(int device) const {
  absl::MutexLock lock(&mu_);
  const Load* load = Find(device);
  return load == nullptr ? 0 : load->bytes;
}

uint64_t DevicePicker::batches(int device) const {
  absl::MutexLock lock(&mu_);
  const Load* load = Find(device);
  return load == nullptr ? 0 : load->batches;
}

}  // namespace primserve::cuda
