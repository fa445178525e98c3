#include "worker/chief/event_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/tfrecord.h"

namespace lockstep::chief {

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(Options options) {
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  std::string hostname = options.hostname;
  if (hostname.empty()) {
    char buf[256] = {};
    if (::gethostname(buf, sizeof(buf) - 1) != 0) return PathError(errno, "gethostname", "");
    hostname = buf;
  }
  LS_RETURN_IF_ERROR(CheckWritable(options.dir, "summaries.dir"));
  std::string path =
      absl::StrCat(options.dir, "/events.out.tfevents.", absl::ToUnixSeconds(clock->Now()), ".",
                   hostname, options.filename_suffix);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return PathError(errno, "create event file", path);
  std::FILE* file = ::fdopen(fd, "w");
  if (file == nullptr) {
    int err = errno;
    ::close(fd);
    return PathError(err, "fdopen event file", path);
  }
  std::unique_ptr<EventWriter> writer(new EventWriter(path, file, clock));
  lockstep::v1::Event first;
  first.set_file_version(std::string(kFileVersion));
  LS_RETURN_IF_ERROR(writer->WriteEvent(std::move(first)));
  LS_RETURN_IF_ERROR(writer->Flush());
  return writer;
}

EventWriter::~EventWriter() {
  (void)Flush();
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

absl::Status EventWriter::AddScalar(absl::string_view tag, int64_t step, float value) {
  return AddScalars(step, {{std::string(tag), value}});
}

absl::Status EventWriter::AddScalars(int64_t step,
                                     const std::vector<std::pair<std::string, float>>& scalars) {
  lockstep::v1::Event event;
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    lockstep::v1::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(value);
  }
  return WriteEvent(std::move(event));
}

absl::Status EventWriter::WriteEvent(lockstep::v1::Event event) {
  if (event.wall_time() == 0) {
    event.set_wall_time(absl::ToDoubleSeconds(clock_->Now() - absl::UnixEpoch()));
  }
  const std::string record = EncodeTfRecord(event.SerializeAsString());
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    error_ = PathError(errno, "write event file", path_);
  } else if (std::fflush(file_) != 0) {  // whole events reach the file as they come
    error_ = PathError(errno, "flush event file", path_);
  }
  return error_;
}

absl::Status EventWriter::Flush() {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (std::fflush(file_) != 0) {
    error_ = PathError(errno, "flush event file", path_);
  } else if (::fsync(::fileno(file_)) != 0) {
    error_ = PathError(errno, "fsync event file", path_);
  }
  return error_;
}

}  // namespace lockstep::chief
