#include "data/cifar10.h"

#include <filesystem>

#include "data/data_file.h"
#include "util/check.h"

namespace cg::data {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> split_files(bool train) {
  if (!train) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back(fmt::format("data_batch_{}.bin", i));
  return names;
}

// Appends every record of one batch file to `set`.
void read_batch_file(const std::string& path, ImageSet& set) {
  constexpr int64_t kRecordsPerRead = 1000;
  DataFile file(path);
  std::vector<uint8_t> chunk;
  int64_t records = 0;
  while (true) {
    // The length is not known up front (the file may be gzipped): read whole records until the
    // data ends, and judge a partial last record by what the next whole record would need.
    chunk.clear();
    const int64_t got = file.read_up_to(chunk, kRecordsPerRead * kCifar10RecordBytes, -1);
    const int64_t whole = got / kCifar10RecordBytes;
    if (got % kCifar10RecordBytes != 0) file.fail_short((records + whole + 1) * kCifar10RecordBytes);
    for (int64_t r = 0; r < whole; ++r) {
      const uint8_t* record = chunk.data() + r * kCifar10RecordBytes;
      if (record[0] >= 10)
        throw Error(fmt::format("{}: record {} has label {}, not a CIFAR-10 class (0..9): corrupt file?", path,
                                records + r, int(record[0])));
      set.labels.push_back(record[0]);
      set.pixels.insert(set.pixels.end(), record + 1, record + kCifar10RecordBytes);
    }
    records += whole;
    if (got < kRecordsPerRead * kCifar10RecordBytes) break;
  }
  if (records == 0) throw Error(fmt::format("{} is empty: expected {}-byte records", path, kCifar10RecordBytes));
  set.count += records;
}

}  // namespace

ImageSet read_cifar10(const std::string& dir, Split split) {
  const std::vector<std::string> names = split_files(split == Split::train);
  std::string base = dir;
  const fs::path nested = fs::path(dir) / "cifar-10-batches-bin";
  if (!fs::exists(fs::path(dir) / names[0]) && !fs::exists(fs::path(dir) / (names[0] + ".gz")) &&
      fs::is_directory(nested))
    base = nested.string();
  std::vector<std::string> paths;
  // All files must be present before any is read.
  for (const auto& name : names)
    paths.push_back(find_data_file(base, name, "unpack CIFAR-10's binary version there, or set the data path"));

  ImageSet set;
  set.channels = 3;
  set.height = set.width = 32;
  set.pixels.reserve(size_t(paths.size()) * 10000 * size_t(kCifar10RecordBytes - 1));
  set.labels.reserve(paths.size() * 10000);
  for (const auto& path : paths) read_batch_file(path, set);
  return set;
}

std::unique_ptr<Dataset> load_cifar10(const std::string& dir, Split split, int image_size) {
  Normalization norm{{std::begin(kCifar10Mean), std::end(kCifar10Mean)},
                     {std::begin(kCifar10Std), std::end(kCifar10Std)}};
  return std::make_unique<ImageDataset>("cifar10", read_cifar10(dir, split), 10, std::move(norm), image_size);
}

}  // namespace cg::data
