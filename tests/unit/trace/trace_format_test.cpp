// The trace format under good and bad input: round trip, a file cut at every
// byte offset, corrupt blocks, foreign and empty files, newer versions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "tests/unit/trace/synthetic_trace.h"
#include "trace/reader.h"

namespace cuxfer::trace {
namespace {

using testing::SyntheticTrace;

class TraceFormat : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cuxfer-trace-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void spit(const std::string& p, const std::string& data) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << data;
  }

  static SyntheticTrace sample() {
    SyntheticTrace t;
    uint32_t s1 = t.site(0x401234);
    t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", "abcdef"});
    t.callsites.push_back({7, {0x401000, 0x402000, 0x403000}});
    t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 5000, false, s1).passthrough =
        static_cast<uint8_t>(PassthroughReason::NoFreeBuffer);
    t.copy(Direction::DtoH, MemKind::Pinned, 4096, 700, true, 7).result = 700;
    t.gpu(t.events.back(), 300);
    t.notes = {"note one", "note two"};
    t.status.cupti = CuptiState::Active;
    t.status.cupti_reason = "";
    t.status.events_dropped = 3;
    t.handover = CuptiHandover{1'500'000'000, "cuptiActivityRegisterCallbacks from libtorch_cuda.so"};
    return t;
  }

  std::filesystem::path dir_;
};

TEST_F(TraceFormat, RoundTripKeepsEveryField) {
  SyntheticTrace t = sample();
  std::string error;
  ASSERT_TRUE(t.write(path("a.trace"), &error)) << error;
  Trace r;
  ASSERT_EQ(read_trace(path("a.trace"), r, error), ReadStatus::Ok) << error;
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.cut_reason, "");
  ASSERT_TRUE(r.has_process);
  EXPECT_EQ(r.process.pid, t.process.pid);
  EXPECT_EQ(r.process.ppid, t.process.ppid);
  EXPECT_EQ(r.process.exe, t.process.exe);
  EXPECT_EQ(r.process.argv, t.process.argv);
  EXPECT_EQ(r.process.hostname, "node0");
  EXPECT_EQ(r.process.start_realtime_ns, t.process.start_realtime_ns);
  EXPECT_EQ(r.process.start_monotonic_ns, t.process.start_monotonic_ns);
  EXPECT_EQ(r.process.stack_depth, 16u);
  EXPECT_EQ(r.api_names, t.apis);
  ASSERT_EQ(r.modules.size(), 1u);
  EXPECT_EQ(r.modules[0].path, "/opt/app/train");
  EXPECT_EQ(r.modules[0].build_id, "abcdef");
  EXPECT_EQ(r.modules[0].high, 0x500000u);
  ASSERT_EQ(r.callsites.size(), 2u);
  EXPECT_EQ(r.callsites[1].id, 7u);
  EXPECT_EQ(r.callsites[1].frames, (std::vector<uint64_t>{0x401000, 0x402000, 0x403000}));
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(std::memcmp(r.events.data(), t.events.data(), 2 * sizeof(Event)), 0);
  ASSERT_EQ(r.gpu_records.size(), 1u);
  EXPECT_EQ(r.gpu_records[0].correlation_id, t.events[1].correlation_id);
  EXPECT_EQ(r.notes, t.notes);
  ASSERT_TRUE(r.has_status);
  EXPECT_EQ(r.status.cupti, CuptiState::Active);
  EXPECT_EQ(r.status.events_dropped, 3u);
  EXPECT_EQ(r.status.events_recorded, 2u);
  ASSERT_TRUE(r.has_cupti_handover);
  EXPECT_EQ(r.cupti_handover.t_ns, 1'500'000'000u);
  EXPECT_EQ(r.cupti_handover.reason, t.handover->reason);
  EXPECT_EQ(r.api_name(r.events[0].api), std::string("cudaMemcpy"));
  EXPECT_EQ(r.api_name(999), std::string("?"));
  EXPECT_EQ(r.format_version, kFormatVersion);
  EXPECT_EQ(r.events[0].passthrough, static_cast<uint8_t>(PassthroughReason::NoFreeBuffer));
  EXPECT_EQ(r.events[1].result, 700);
}

// A version 1 file (a 32-bit result where version 2 has a 16-bit one and the
// rewrite's passthrough reason) reads into the current layout: every other
// field as written, the result as its writer recorded it, no reason.
TEST_F(TraceFormat, Version1EventsReadIntoTheCurrentLayout) {
  SyntheticTrace t = sample();
  t.format_version = 1;
  t.events[0].result = -2;  // bytes 62-63 of a version 1 event: 0xffff, not a reason
  ASSERT_TRUE(t.write(path("v1.trace")));
  Trace r;
  std::string error;
  ASSERT_EQ(read_trace(path("v1.trace"), r, error), ReadStatus::Ok) << error;
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.format_version, 1u);
  ASSERT_EQ(r.events.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(std::memcmp(&r.events[i], &t.events[i], offsetof(Event, result)), 0) << i;
    EXPECT_EQ(r.events[i].passthrough, static_cast<uint8_t>(PassthroughReason::None)) << i;
    EXPECT_EQ(r.events[i].reserved, 0) << i;
  }
  EXPECT_EQ(r.events[0].result, -2);
  EXPECT_EQ(r.events[1].result, 700);
  EXPECT_EQ(r.notes, t.notes);
}

// A version 1 result outside 16 bits (no CUDA code is) is kept as the nearest
// value that fits: a failure stays a failure.
TEST_F(TraceFormat, Version1ResultOutside16BitsSaturates) {
  SyntheticTrace t = sample();
  t.format_version = 1;
  ASSERT_TRUE(t.write(path("v1.trace")));
  std::string data = slurp(path("v1.trace"));
  size_t pos = sizeof(FileHeader);
  size_t events = std::string::npos;
  while (pos + sizeof(BlockHeader) <= data.size()) {
    BlockHeader h;
    std::memcpy(&h, data.data() + pos, sizeof h);
    if (h.type == static_cast<uint16_t>(BlockType::Events)) events = pos + sizeof h;
    pos += sizeof h + h.stored_size;
  }
  ASSERT_NE(events, std::string::npos);
  const int32_t big = 100000, low = -70000;
  std::memcpy(&data[events + 60], &big, sizeof big);
  std::memcpy(&data[events + sizeof(Event) + 60], &low, sizeof low);
  spit(path("v1.trace"), data);
  Trace r;
  std::string error;
  ASSERT_EQ(read_trace(path("v1.trace"), r, error), ReadStatus::Ok) << error;
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].result, INT16_MAX);
  EXPECT_EQ(r.events[1].result, INT16_MIN);
  EXPECT_EQ(r.events[0].passthrough, 0);
  EXPECT_EQ(record_result(5), 5);
  EXPECT_EQ(record_result(999), 999);
  EXPECT_EQ(record_result(1LL << 40), INT16_MAX);
}

TEST_F(TraceFormat, ManyEventBlocksConcatenate) {
  SyntheticTrace t;
  t.events_per_block = 100;
  for (int i = 0; i < 1050; ++i) t.copy(Direction::HtoD, MemKind::Pinned, i, 10);
  ASSERT_TRUE(t.write(path("many.trace")));
  Trace r;
  std::string error;
  ASSERT_EQ(read_trace(path("many.trace"), r, error), ReadStatus::Ok);
  ASSERT_EQ(r.events.size(), 1050u);
  for (int i = 0; i < 1050; ++i) ASSERT_EQ(r.events[i].bytes, static_cast<uint64_t>(i));
}

// A streaming read (EventBlocks): skipping the events keeps every other part
// as read_trace reads it; a sink gets the same events, a block at a time, in
// file order; every prefix of the file is cut where read_trace cuts it (the
// frame and the events of a streamed report then agree).
TEST_F(TraceFormat, StreamingReadsAgreeWithTheWholeRead) {
  SyntheticTrace t = sample();
  t.events_per_block = 2;
  for (int i = 0; i < 7; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 100 + i, 10);
  ASSERT_TRUE(t.write(path("full.trace")));
  const std::string full = slurp(path("full.trace"));
  for (size_t len = sizeof(FileHeader); len <= full.size(); ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    spit(path("s.trace"), full.substr(0, len));
    Trace whole, skipped, streamed;
    std::string error;
    ASSERT_EQ(read_trace(path("s.trace"), whole, error), ReadStatus::Ok);
    EventBlocks skip;
    skip.skip = true;
    ASSERT_EQ(read_trace(path("s.trace"), skipped, error, skip), ReadStatus::Ok);
    std::vector<Event> got;
    size_t blocks = 0;
    EventBlocks sink;
    sink.sink = [&](std::span<Event> events) {
      ++blocks;
      got.insert(got.end(), events.begin(), events.end());
      return true;
    };
    ASSERT_EQ(read_trace(path("s.trace"), streamed, error, sink), ReadStatus::Ok);
    for (const Trace* r : {&skipped, &streamed}) {
      EXPECT_TRUE(r->events.empty());
      EXPECT_EQ(r->blocks_read, whole.blocks_read);
      EXPECT_EQ(r->cut_reason, whole.cut_reason);
      EXPECT_EQ(r->complete, whole.complete);
      EXPECT_EQ(r->callsites.size(), whole.callsites.size());
      EXPECT_EQ(r->gpu_records.size(), whole.gpu_records.size());
      EXPECT_EQ(r->notes, whole.notes);
    }
    ASSERT_EQ(got.size(), whole.events.size());
    if (!got.empty()) EXPECT_EQ(std::memcmp(got.data(), whole.events.data(), got.size() * sizeof(Event)), 0);
    EXPECT_EQ(blocks, (whole.events.size() + 1) / 2);
  }
  // A sink that says stop ends the read there, and says so.
  Trace stopped;
  std::string error;
  EventBlocks stop;
  stop.sink = [](std::span<Event>) { return false; };
  ASSERT_EQ(read_trace(path("full.trace"), stopped, error, stop), ReadStatus::Ok);
  EXPECT_FALSE(stopped.complete);
  EXPECT_FALSE(stopped.cut_reason.empty());
}

// GPU records in a streaming read: passed by (skip_gpu_records) they are
// counted, and those a join by time cannot take (a correlation id) and the
// kernel records without one (which stream beside the join) counted apart; handed over (gpu_sink) they are the whole read's records,
// after the events written before them; either way the trace is cut where
// read_trace cuts it.
TEST_F(TraceFormat, StreamingReadPassesGpuRecordsByOrHandsThemOver) {
  SyntheticTrace t = sample();  // one record with a correlation id
  t.events_per_block = 2;
  for (int i = 0; i < 5; ++i) {
    t.copy(Direction::HtoD, MemKind::Pinned, 100 + i, 10);
    t.gpu(t.events.back(), 50);
    t.gpu_records.back().correlation_id = 0;
  }
  t.gpu(t.events.back(), 80);
  t.gpu_records.back().kind = static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
  t.gpu_records.back().correlation_id = 0;
  t.gpu(t.events.back(), 85);  // a kernel record of an older shim, with a correlation id
  t.gpu_records.back().kind = static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
  t.gpu_records.back().correlation_id = 7;
  t.gpu(t.events.back(), 90);
  t.gpu_records.back().kind = static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory);
  t.gpu_records.back().correlation_id = 0;
  ASSERT_TRUE(t.write(path("full.trace")));
  const std::string full = slurp(path("full.trace"));
  for (size_t len = sizeof(FileHeader); len <= full.size(); ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    spit(path("s.trace"), full.substr(0, len));
    Trace whole, passed, handed;
    std::string error;
    ASSERT_EQ(read_trace(path("s.trace"), whole, error), ReadStatus::Ok);
    EventBlocks pass;
    pass.skip = true;
    pass.skip_gpu_records = true;
    ASSERT_EQ(read_trace(path("s.trace"), passed, error, pass), ReadStatus::Ok);
    uint64_t not_by_time = 0, unified = 0, kernels = 0;
    for (const auto& r : whole.gpu_records) {
      const bool um = r.kind == static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory);
      const bool kernel = r.kind == static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
      unified += um;
      // A kernel record without a correlation id streams (the overlap
      // analysis takes it); one with an id is read whole, as a copy's is.
      not_by_time += !um && r.correlation_id != 0;
      kernels += kernel && r.correlation_id == 0;
    }
    EXPECT_EQ(passed.gpu_records_passed.records, whole.gpu_records.size());
    EXPECT_EQ(passed.gpu_records_passed.not_joined_by_time, not_by_time);
    EXPECT_EQ(passed.gpu_records_passed.kernels, kernels);
    EXPECT_EQ(passed.gpu_records_passed.unified_memory, unified);
    std::vector<GpuRecord> got;
    size_t events_before_last_record = 0, events = 0;
    EventBlocks hand;
    hand.sink = [&](std::span<Event> e) {
      events += e.size();
      return true;
    };
    hand.gpu_sink = [&](std::span<GpuRecord> r) {
      got.insert(got.end(), r.begin(), r.end());
      events_before_last_record = events;
      return true;
    };
    ASSERT_EQ(read_trace(path("s.trace"), handed, error, hand), ReadStatus::Ok);
    for (const Trace* r : {&passed, &handed}) {
      EXPECT_TRUE(r->gpu_records.empty());
      EXPECT_EQ(r->blocks_read, whole.blocks_read);
      EXPECT_EQ(r->cut_reason, whole.cut_reason);
      EXPECT_EQ(r->complete, whole.complete);
    }
    ASSERT_EQ(got.size(), whole.gpu_records.size());
    if (!got.empty()) {
      EXPECT_EQ(std::memcmp(got.data(), whole.gpu_records.data(), got.size() * sizeof(GpuRecord)), 0);
      EXPECT_EQ(events_before_last_record, whole.events.size());  // SyntheticTrace writes the records last
    }
  }
  // A GPU sink that says stop ends the read there, and says so.
  Trace stopped;
  std::string error;
  EventBlocks stop;
  stop.sink = [](std::span<Event>) { return true; };
  stop.gpu_sink = [](std::span<GpuRecord>) { return false; };
  ASSERT_EQ(read_trace(path("full.trace"), stopped, error, stop), ReadStatus::Ok);
  EXPECT_FALSE(stopped.complete);
  EXPECT_FALSE(stopped.cut_reason.empty());
}

// Blocks of events and of GPU records written in turn reach the sinks in
// file order; a GPU sink alone hands the records over too (the events are
// then kept, the records not).
TEST_F(TraceFormat, SinksSeeEventAndGpuRecordBlocksInFileOrder) {
  std::string error;
  auto w = TraceWriter::create(path("i.trace"), 0644, &error);
  ASSERT_TRUE(w) << error;
  for (uint64_t k = 1; k <= 3; ++k) {
    Event e[2]{};
    e[0].bytes = 10 * k;
    e[1].bytes = 10 * k + 1;
    w->write_block(BlockType::Events, e, sizeof e);
    GpuRecord g{};
    g.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
    g.bytes = 10 * k;
    w->write_block(BlockType::GpuRecords, &g, sizeof g);
  }
  w->write_block(BlockType::End, "", 0);
  w.reset();
  std::vector<std::string> seen;
  EventBlocks hand;
  hand.sink = [&](std::span<Event> e) {
    seen.push_back("events " + std::to_string(e.size()) + " from " + std::to_string(e[0].bytes));
    return true;
  };
  hand.gpu_sink = [&](std::span<GpuRecord> r) {
    seen.push_back("records " + std::to_string(r.size()) + " from " + std::to_string(r[0].bytes));
    return true;
  };
  Trace streamed;
  ASSERT_EQ(read_trace(path("i.trace"), streamed, error, hand), ReadStatus::Ok) << error;
  const std::vector<std::string> in_file_order = {"events 2 from 10", "records 1 from 10", "events 2 from 20",
                                                  "records 1 from 20", "events 2 from 30", "records 1 from 30"};
  EXPECT_EQ(seen, in_file_order);
  EXPECT_TRUE(streamed.events.empty());
  EXPECT_TRUE(streamed.gpu_records.empty());
  EXPECT_TRUE(streamed.complete);
  // The GPU sink alone: the events are read into the trace, the records handed over.
  seen.clear();
  EventBlocks records_only;
  records_only.gpu_sink = hand.gpu_sink;
  Trace kept;
  ASSERT_EQ(read_trace(path("i.trace"), kept, error, records_only), ReadStatus::Ok) << error;
  EXPECT_EQ(seen, (std::vector<std::string>{"records 1 from 10", "records 1 from 20", "records 1 from 30"}));
  EXPECT_EQ(kept.events.size(), 6u);
  EXPECT_TRUE(kept.gpu_records.empty());
  EXPECT_TRUE(kept.complete);
}

// Every prefix of a valid trace reads without crashing: what is complete is
// kept (a prefix of the original events), the rest is reported as cut.
TEST_F(TraceFormat, TruncationAtEveryByteOffset) {
  SyntheticTrace t = sample();
  t.events_per_block = 1;  // several event blocks, so prefixes keep some events
  for (int i = 0; i < 6; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 100 + i, 10);
  ASSERT_TRUE(t.write(path("full.trace")));
  const std::string full = slurp(path("full.trace"));
  ASSERT_GT(full.size(), sizeof(FileHeader));
  size_t last_events = 0;
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    spit(path("cut.trace"), full.substr(0, len));
    Trace r;
    std::string error;
    ReadStatus st = read_trace(path("cut.trace"), r, error);
    if (len < sizeof(FileHeader)) {
      EXPECT_EQ(st, ReadStatus::Empty);
      EXPECT_NE(error.find("cut.trace"), std::string::npos);
      continue;
    }
    ASSERT_EQ(st, ReadStatus::Ok) << error;
    EXPECT_FALSE(r.complete);
    EXPECT_FALSE(r.cut_reason.empty());
    ASSERT_LE(r.events.size(), t.events.size());
    EXPECT_GE(r.events.size(), last_events);  // a longer prefix never loses events
    last_events = r.events.size();
    if (!r.events.empty()) {
      EXPECT_EQ(std::memcmp(r.events.data(), t.events.data(), r.events.size() * sizeof(Event)), 0);
    }
  }
  EXPECT_EQ(last_events, t.events.size());  // all event blocks precede status and end
}

TEST_F(TraceFormat, CorruptPayloadStopsAtThatBlock) {
  SyntheticTrace t;
  t.events_per_block = 1;
  for (int i = 0; i < 4; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 1000 + i, 10);
  ASSERT_TRUE(t.write(path("c.trace")));
  std::string data = slurp(path("c.trace"));
  // Walk the blocks to the third event block and flip a byte in its payload.
  size_t pos = sizeof(FileHeader);
  int events_seen = 0;
  while (pos < data.size()) {
    BlockHeader h;
    std::memcpy(&h, data.data() + pos, sizeof h);
    if (h.type == static_cast<uint16_t>(BlockType::Events) && ++events_seen == 3) {
      data[pos + sizeof h + h.stored_size / 2] ^= 0x5a;
      break;
    }
    pos += sizeof h + h.stored_size;
  }
  ASSERT_EQ(events_seen, 3);
  spit(path("c.trace"), data);
  Trace r;
  std::string error;
  ASSERT_EQ(read_trace(path("c.trace"), r, error), ReadStatus::Ok);
  EXPECT_EQ(r.events.size(), 2u);
  EXPECT_FALSE(r.complete);
  EXPECT_NE(r.cut_reason.find("corrupt"), std::string::npos) << r.cut_reason;
  EXPECT_NE(r.cut_reason.find(std::to_string(pos)), std::string::npos) << r.cut_reason;
}

TEST_F(TraceFormat, CorruptBlockHeaderStopsReading) {
  SyntheticTrace t = sample();
  ASSERT_TRUE(t.write(path("h.trace")));
  std::string data = slurp(path("h.trace"));
  data[sizeof(FileHeader) + 9] ^= 0x01;  // raw_size of the first block: header check fails
  spit(path("h.trace"), data);
  Trace r;
  std::string error;
  ASSERT_EQ(read_trace(path("h.trace"), r, error), ReadStatus::Ok);
  EXPECT_FALSE(r.has_process);
  EXPECT_EQ(r.blocks_read, 0u);
  EXPECT_NE(r.cut_reason.find("corrupt block header at offset 16"), std::string::npos) << r.cut_reason;
}

TEST_F(TraceFormat, NoEndMarkerMeansCutShort) {
  SyntheticTrace t = sample();
  t.write_end = false;
  ASSERT_TRUE(t.write(path("k.trace")));
  Trace r;
  std::string error;
  ASSERT_EQ(read_trace(path("k.trace"), r, error), ReadStatus::Ok);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.events.size(), t.events.size());
  EXPECT_NE(r.cut_reason.find("did not shut down cleanly"), std::string::npos);
}

TEST_F(TraceFormat, EndsCleanlyLooksAtTheLastBlockOnly) {
  SyntheticTrace t = sample();
  ASSERT_TRUE(t.write(path("done.trace")));
  EXPECT_TRUE(trace_ends_cleanly(path("done.trace")));
  t.write_end = false;
  ASSERT_TRUE(t.write(path("cut.trace")));
  EXPECT_FALSE(trace_ends_cleanly(path("cut.trace")));
  // Cut inside the End header, or one byte of it changed: not clean.
  const std::string whole = slurp(path("done.trace"));
  spit(path("torn.trace"), whole.substr(0, whole.size() - 1));
  EXPECT_FALSE(trace_ends_cleanly(path("torn.trace")));
  std::string flipped = whole;
  flipped[flipped.size() - 20] ^= 1;
  spit(path("flipped.trace"), flipped);
  EXPECT_FALSE(trace_ends_cleanly(path("flipped.trace")));
  spit(path("short.trace"), "XCBK");
  EXPECT_FALSE(trace_ends_cleanly(path("short.trace")));
  EXPECT_FALSE(trace_ends_cleanly(path("missing.trace")));
}

TEST_F(TraceFormat, ForeignFilesAreRefused) {
  spit(path("text"), "hello, this is not a trace at all\n");
  spit(path("short"), "hi");
  Trace r;
  std::string error;
  EXPECT_EQ(read_trace(path("text"), r, error), ReadStatus::Foreign);
  EXPECT_EQ(error, path("text") + ": not a cuxfer trace");
  EXPECT_EQ(read_trace(path("short"), r, error), ReadStatus::Foreign);
  EXPECT_EQ(read_trace("/proc/self/exe", r, error), ReadStatus::Foreign);  // an ELF file
}

TEST_F(TraceFormat, EmptyAndMissingFiles) {
  spit(path("empty"), "");
  Trace r;
  std::string error;
  EXPECT_EQ(read_trace(path("empty"), r, error), ReadStatus::Empty);
  EXPECT_NE(error.find("empty"), std::string::npos);
  EXPECT_EQ(read_trace(path("nope"), r, error), ReadStatus::Missing);
  EXPECT_NE(error.find("No such file"), std::string::npos);
}

TEST_F(TraceFormat, NewerVersionIsUnsupported) {
  SyntheticTrace t = sample();
  ASSERT_TRUE(t.write(path("v.trace")));
  std::string data = slurp(path("v.trace"));
  uint32_t v = kFormatVersion + 1;
  std::memcpy(&data[8], &v, sizeof v);
  spit(path("v.trace"), data);
  Trace r;
  std::string error;
  EXPECT_EQ(read_trace(path("v.trace"), r, error), ReadStatus::Unsupported);
  EXPECT_NE(error.find("version " + std::to_string(kFormatVersion + 1)), std::string::npos) << error;
  EXPECT_NE(error.find("reads version " + std::to_string(kFormatVersion)), std::string::npos) << error;
  EXPECT_NE(error.find("upgrade"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
}

TEST_F(TraceFormat, UnknownBlockTypesAreSkipped) {
  std::string error;
  auto w = TraceWriter::create(path("u.trace"), 0644, &error);
  ASSERT_TRUE(w) << error;
  w->write_block(static_cast<BlockType>(200), std::string("future data"));
  Event e{};
  e.bytes = 42;
  w->write_block(BlockType::Events, &e, sizeof e);
  w->write_block(BlockType::End, "", 0);
  w.reset();
  Trace r;
  ASSERT_EQ(read_trace(path("u.trace"), r, error), ReadStatus::Ok);
  EXPECT_TRUE(r.complete);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].bytes, 42u);
}

// Found by fuzz/fuzz_trace_reader: an empty first block read as "truncated",
// and an empty record block copied to a null pointer.
TEST_F(TraceFormat, EmptyBlocksAreEmptyNotTruncated) {
  std::string error;
  auto w = TraceWriter::create(path("e.trace"), 0644, &error);
  ASSERT_TRUE(w) << error;
  w->write_block(BlockType::Events, "", 0);
  w->write_block(BlockType::GpuRecords, "", 0);
  w->write_block(BlockType::End, "", 0);
  w.reset();
  Trace r;
  ASSERT_EQ(read_trace(path("e.trace"), r, error), ReadStatus::Ok) << error;
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.cut_reason, "");
  EXPECT_EQ(r.blocks_read, 3u);
  EXPECT_TRUE(r.events.empty());
}

TEST_F(TraceFormat, ImplausibleExpansionStopsReading) {
  // Blocks of zeros compress ~1000:1 or better: six 64 MiB event blocks make a
  // file of a few hundred KiB that would expand to 384 MiB. The reader stops
  // at the 256 MiB floor of its limit instead of allocating it all.
  std::string error;
  auto w = TraceWriter::create(path("bomb.trace"), 0600, &error);
  ASSERT_TRUE(w) << error;
  const std::string zeros(64u << 20, '\0');
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(w->write_block(BlockType::Events, zeros));
  w.reset();
  ASSERT_LT(std::filesystem::file_size(path("bomb.trace")), 1u << 20);
  Trace r;
  ASSERT_EQ(read_trace(path("bomb.trace"), r, error), ReadStatus::Ok) << error;
  EXPECT_FALSE(r.complete);
  EXPECT_NE(r.cut_reason.find("not a plausible trace"), std::string::npos) << r.cut_reason;
  EXPECT_EQ(r.events.size(), 4u * (64u << 20) / sizeof(Event));  // the blocks within the limit
}

TEST_F(TraceFormat, WriterRefusesToClobber) {
  std::string error;
  auto a = TraceWriter::create(path("x.trace"), 0644, &error);
  ASSERT_TRUE(a);
  auto b = TraceWriter::create(path("x.trace"), 0644, &error);
  EXPECT_FALSE(b);
  EXPECT_NE(error.find("x.trace"), std::string::npos);
}

TEST(TraceRecords, DecodersRejectEveryTruncation) {
  ProcessInfo p;
  p.pid = 1;
  p.exe = "/bin/x";
  p.argv = {"x", "y"};
  std::string buf;
  encode(p, buf);
  for (size_t len = 0; len < buf.size(); ++len) {
    ProcessInfo q;
    EXPECT_FALSE(decode(std::string_view(buf).substr(0, len), q)) << len;
  }
  ProcessInfo q;
  EXPECT_TRUE(decode(buf, q));
  buf += 'x';
  EXPECT_FALSE(decode(buf, q));  // trailing garbage
}

TEST(TraceRecords, HandoverDecoderRejectsEveryTruncation) {
  CuptiHandover h{42, "cuptiFinalize from libkineto.so"};
  std::string buf;
  encode(h, buf);
  for (size_t len = 0; len < buf.size(); ++len) {
    CuptiHandover q;
    EXPECT_FALSE(decode(std::string_view(buf).substr(0, len), q)) << len;
  }
  CuptiHandover q;
  ASSERT_TRUE(decode(buf, q));
  EXPECT_EQ(q.t_ns, 42u);
  EXPECT_EQ(q.reason, h.reason);
  buf += 'x';
  EXPECT_FALSE(decode(buf, q));
}

TEST(TraceRecords, RunModesAndPyCodesRoundTripAndRejectTruncation) {
  RunModes m;
  m.rewrite_pin = true;
  m.register_in_place = true;
  m.python_stacks = true;
  m.policy_path = "/etc/p.json";
  std::string buf;
  encode(m, buf);
  for (size_t len = 0; len < buf.size(); ++len) {
    RunModes q;
    EXPECT_FALSE(decode(std::string_view(buf).substr(0, len), q)) << len;
  }
  RunModes q;
  ASSERT_TRUE(decode(buf, q));
  EXPECT_TRUE(q.rewrite_pin);
  EXPECT_FALSE(q.policy);
  EXPECT_TRUE(q.register_in_place);
  EXPECT_TRUE(q.python_stacks);
  EXPECT_EQ(q.policy_path, "/etc/p.json");

  std::vector<PyCode> codes(2);
  codes[0] = {7, 0x030b, 42, "/home/me/train.py", "Loader.batch", std::string("\x80\x00\xd8", 3)};
  codes[1] = {8, 0x030a, 1, "x.py", "<module>", ""};
  buf.clear();
  encode(codes, buf);
  for (size_t len = 0; len < buf.size(); ++len) {
    std::vector<PyCode> back;
    EXPECT_FALSE(decode(std::string_view(buf).substr(0, len), back)) << len;
  }
  std::vector<PyCode> back;
  ASSERT_TRUE(decode(buf, back));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].qualname, "Loader.batch");
  EXPECT_EQ(back[0].line_table, codes[0].line_table);
  EXPECT_EQ(back[1].version, 0x030au);
}

TEST(TraceRecords, CuptiGateRoundTripsAndRejectsTruncationAndBadValues) {
  std::vector<CuptiGateChange> g = {{100, false, GateReason::SyncOnly}, {250, true, GateReason::Sample},
                                    {400, false, GateReason::CostCap}};
  std::string buf;
  encode(g, buf);
  for (size_t len = 0; len < buf.size(); ++len) {
    std::vector<CuptiGateChange> q;
    EXPECT_FALSE(decode(std::string_view(buf).substr(0, len), q)) << len;
    EXPECT_TRUE(q.empty()) << "a failed decode appends nothing";
  }
  std::vector<CuptiGateChange> q = {{1, true, GateReason::Start}};
  ASSERT_TRUE(decode(buf, q));  // appends
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(std::vector<CuptiGateChange>(q.begin() + 1, q.end()), g);
  std::string bad = buf;
  bad[4 + 8 + 1] = static_cast<char>(kGateReasonCount);  // first change's reason out of range
  std::vector<CuptiGateChange> r;
  EXPECT_FALSE(decode(bad, r));
  bad = buf;
  bad[4 + 8] = 2;  // `on` neither 0 nor 1
  EXPECT_FALSE(decode(bad, r));
  EXPECT_STREQ(gate_reason_name(GateReason::CostCap), "cost_cap");
  for (uint8_t i = 0; i < kGateReasonCount; ++i) EXPECT_STRNE(gate_reason_name(static_cast<GateReason>(i)), "?");
}

TEST(TraceRecords, HugeCountsAreRefusedNotAllocated) {
  std::string buf;
  uint32_t n = 0xffffffffu;
  buf.append(reinterpret_cast<const char*>(&n), sizeof n);
  std::vector<CallSite> sites;
  EXPECT_FALSE(decode(buf, sites));
  std::vector<std::string> strings;
  EXPECT_FALSE(decode_strings(buf, strings));
  Status s;
  std::string sb;
  encode(s, sb);
  sb[1] = 9;  // CUPTI state out of range
  EXPECT_FALSE(decode(sb, s));
}

TEST(TraceEvent, NamesForEveryEnumValue) {
  EXPECT_STREQ(to_string(Direction::HtoD), "H2D");
  EXPECT_STREQ(to_string(Direction::Peer), "peer");
  EXPECT_STREQ(to_string(static_cast<Direction>(77)), "unknown");
  EXPECT_STREQ(to_string(MemKind::Registered), "registered");
  EXPECT_STREQ(to_string(EventKind::HostRegister), "host_register");
  for (uint8_t v = 0; v < kPassthroughReasons; ++v)
    EXPECT_STRNE(to_string(static_cast<PassthroughReason>(v)), "unknown") << int(v);
  EXPECT_STREQ(to_string(PassthroughReason::None), "not_recorded");
  EXPECT_STREQ(to_string(PassthroughReason::BelowThreshold), "below_threshold");
  EXPECT_STREQ(to_string(static_cast<PassthroughReason>(kPassthroughReasons)), "unknown");
}

}  // namespace
}  // namespace cuxfer::trace
