// Fuzz target: structure-aware fuzzing of crux.v1.Envelope.
//
// The input is a serialised Envelope. A custom mutator (LLVMFuzzerCustomMutator) parses it and
// mutates the message through protobuf reflection - one field of one (nested) message at a time:
// boundary numbers (0, max, NaN, infinities, denormals, values just outside each documented
// range), ids that are valid, too long, or carry control characters / invalid UTF-8 / bidi
// overrides, repeated fields grown, shrunk or given duplicates, another body type - so that
// most inputs are well-formed messages whose *values* reach Validate and the conversions
// (Debian ships no libprotobuf-mutator, hence this small one). Inputs that do not parse are
// mutated as bytes. Every input runs the checks of protocol_checks.h on the parsed message
// (and on the frame itself, like protocol_decode).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "crux/protocol/codec.h"
#include "protocol_checks.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

using Rng = std::minstd_rand;

constexpr int kMaxDepth = 6;
constexpr int kMaxRepeated = 80;

size_t Pick(Rng& rng, size_t n) {
  return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}
bool Coin(Rng& rng, int one_in) { return Pick(rng, static_cast<size_t>(one_in)) == 0; }

// Text values: valid ids and names of every kind the protocol uses, then the edge cases of the
// id grammar and of core::IsPrintableText.
std::string InterestingString(Rng& rng) {
  static const std::array<std::string_view, 34> kValues = {
      "host0",      "host1",      "host0/nic0",  "host1/nic0", "tor0",     "agg1",
      "tor0->agg1", "tor0-agg1",  "job-1",       "gpt3",       "tenant-a", "ring_allreduce",
      "all_to_all", "pipeline",   "STRICT",      "DWRR",       "strict",   "dwrr",
      "sonic",      "NCCL_IB_TC", "NCCL_IB_SL",  "106",        "",         " ",
      "a b",        "a\"b",       "\x1b[2J",     "a\nb",       "\xc3\x28", "\xe2\x80\xae",
      "\xc2\x9b",   "\x7f",       "caf\xc3\xa9", "..\x2f.."};
  const size_t which = Pick(rng, kValues.size() + 4);
  if (which < kValues.size()) return std::string(kValues[which]);
  switch (which - kValues.size()) {
    case 0:
      return std::string(128, 'a');  // Longest valid id.
    case 1:
      return std::string(129, 'a');  // One too long.
    case 2:
      return std::string(4097, 'x');  // Longer than any text field.
    default:
      return std::string(1 + Pick(rng, 300), static_cast<char>('A' + Pick(rng, 26)));
  }
}

uint64_t InterestingUnsigned(Rng& rng, int bits) {
  static const std::array<uint64_t, 24> kValues = {
      0,   1,   2,   3,    4,    7,    8,     63,    64,    99,    100,      101,
      252, 255, 256, 1024, 1025, 4096, 16384, 16385, 65536, 65537, 86400000, 86400001};
  const uint64_t max =
      bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
  switch (Pick(rng, 8)) {
    case 0:
      return max;
    case 1:
      return max / 2 + Pick(rng, 2);
    case 2: {  // Around the day-long time limit and the 2^50 byte limit.
      static const std::array<uint64_t, 5> kBig = {
          uint64_t{24} * 3600 * 1000 * 1000 * 1000, uint64_t{24} * 3600 * 1000 * 1000 * 1000 + 1,
          uint64_t{1} << 50, (uint64_t{1} << 50) + 1, uint64_t{1} << 63};
      return kBig[Pick(rng, kBig.size())] & max;
    }
    case 3:
      return std::uniform_int_distribution<uint64_t>(0, max)(rng);
    default:
      return kValues[Pick(rng, kValues.size())] & max;
  }
}

double InterestingDouble(Rng& rng) {
  static const std::array<double, 18> kValues = {0.0,
                                                 -0.0,
                                                 1.0,
                                                 -1.0,
                                                 0.5,
                                                 1e-300,
                                                 std::numeric_limits<double>::denorm_min(),
                                                 1e24,
                                                 1e25,
                                                 1000,
                                                 1000.0000001,
                                                 0.999999,
                                                 1.0000001,
                                                 std::numeric_limits<double>::max(),
                                                 -std::numeric_limits<double>::max(),
                                                 std::numeric_limits<double>::quiet_NaN(),
                                                 std::numeric_limits<double>::infinity(),
                                                 -std::numeric_limits<double>::infinity()};
  if (Coin(rng, 4)) return std::uniform_real_distribution<double>(-1e6, 1e12)(rng);
  return kValues[Pick(rng, kValues.size())];
}

int EnumValue(Rng& rng, const EnumDescriptor* e) {
  if (Coin(rng, 5)) return static_cast<int>(InterestingUnsigned(rng, 31)) - (Coin(rng, 2) ? 0 : 7);
  return e->value(static_cast<int>(Pick(rng, static_cast<size_t>(e->value_count()))))->number();
}

// Mutates the bytes of `s` with libFuzzer's own mutator.
void MutateBytes(std::string* s, size_t max_size) {
  const size_t cap = std::max(s->size() + 16, size_t{16});
  if (cap > max_size) return;
  s->resize(cap);
  const size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s->data()), cap - 16, cap);
  s->resize(n);
}

void SetScalar(Message* m, const FieldDescriptor* f, Rng& rng, size_t max_size) {
  const Reflection* r = m->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      r->SetInt32(m, f, static_cast<int32_t>(InterestingUnsigned(rng, 32)));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      r->SetInt64(m, f, static_cast<int64_t>(InterestingUnsigned(rng, 64)));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      r->SetUInt32(m, f, static_cast<uint32_t>(InterestingUnsigned(rng, 32)));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->SetUInt64(m, f, InterestingUnsigned(rng, 64));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      r->SetDouble(m, f, InterestingDouble(rng));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      r->SetFloat(m, f, static_cast<float>(InterestingDouble(rng)));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      r->SetBool(m, f, !r->GetBool(*m, f));
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      r->SetEnumValue(m, f, EnumValue(rng, f->enum_type()));
      break;
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s = Coin(rng, 3) ? r->GetString(*m, f) : InterestingString(rng);
      if (Coin(rng, 3)) MutateBytes(&s, max_size);
      r->SetString(m, f, std::move(s));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
}

void AddScalar(Message* m, const FieldDescriptor* f, Rng& rng) {
  const Reflection* r = m->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      r->AddInt32(m, f, static_cast<int32_t>(InterestingUnsigned(rng, 32)));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      r->AddInt64(m, f, static_cast<int64_t>(InterestingUnsigned(rng, 64)));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      r->AddUInt32(m, f, static_cast<uint32_t>(InterestingUnsigned(rng, 32)));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->AddUInt64(m, f, InterestingUnsigned(rng, 64));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      r->AddDouble(m, f, InterestingDouble(rng));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      r->AddFloat(m, f, static_cast<float>(InterestingDouble(rng)));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      r->AddBool(m, f, Coin(rng, 2));
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      r->AddEnumValue(m, f, EnumValue(rng, f->enum_type()));
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      r->AddString(m, f, InterestingString(rng));
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
}

// One (message, field) slot of the message tree.
struct Slot {
  Message* msg;
  const FieldDescriptor* field;
};

// Every field of every message reachable from `m` (set or not), depth-limited. For repeated
// message fields every element is descended into.
void CollectSlots(Message* m, int depth, std::vector<Slot>* out) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    out->push_back({m, f});
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || depth >= kMaxDepth) continue;
    if (f->is_repeated()) {
      for (int j = 0; j < r->FieldSize(*m, f); ++j) {
        CollectSlots(r->MutableRepeatedMessage(m, f, j), depth + 1, out);
      }
    } else if (r->HasField(*m, f)) {
      CollectSlots(r->MutableMessage(m, f), depth + 1, out);
    }
  }
}

// Fills a freshly created message a little, so a new body is not just empty.
void Populate(Message* m, Rng& rng, int depth, size_t max_size) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->containing_oneof() != nullptr || !Coin(rng, 2)) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (depth >= 3) continue;
      Message* child = f->is_repeated() ? r->AddMessage(m, f) : r->MutableMessage(m, f);
      Populate(child, rng, depth + 1, max_size);
    } else if (f->is_repeated()) {
      AddScalar(m, f, rng);
    } else {
      SetScalar(m, f, rng, max_size);
    }
  }
}

void MutateSlot(const Slot& slot, Rng& rng, size_t max_size) {
  Message* m = slot.msg;
  const FieldDescriptor* f = slot.field;
  const Reflection* r = m->GetReflection();
  if (!f->is_repeated()) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(*m, f) && Coin(rng, 3)) {
        r->ClearField(m, f);
      } else {
        Populate(r->MutableMessage(m, f), rng, 0, max_size);  // Also switches a oneof body.
      }
    } else if (Coin(rng, 8)) {
      r->ClearField(m, f);
    } else {
      SetScalar(m, f, rng, max_size);
    }
    return;
  }
  const int size = r->FieldSize(*m, f);
  switch (Pick(rng, 5)) {
    case 0:  // Remove the last element.
      if (size > 0) r->RemoveLast(m, f);
      return;
    case 1:  // Swap two elements (order-dependent checks).
      if (size > 1) {
        r->SwapElements(m, f, static_cast<int>(Pick(rng, static_cast<size_t>(size))),
                        static_cast<int>(Pick(rng, static_cast<size_t>(size))));
      }
      return;
    case 2:  // Duplicate an element (duplicate-detection paths).
      if (size > 0 && size < kMaxRepeated) {
        const int from = static_cast<int>(Pick(rng, static_cast<size_t>(size)));
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          std::unique_ptr<Message> copy(r->GetRepeatedMessage(*m, f, from).New());
          copy->CopyFrom(r->GetRepeatedMessage(*m, f, from));
          r->AddMessage(m, f)->CopyFrom(*copy);
        } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          r->AddString(m, f, r->GetRepeatedString(*m, f, from));
        } else {
          AddScalar(m, f, rng);
        }
      }
      return;
    default:  // Add an element.
      if (size >= kMaxRepeated) return;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        Populate(r->AddMessage(m, f), rng, 0, max_size);
      } else {
        AddScalar(m, f, rng);
      }
      return;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  Rng rng(seed);
  crux::v1::Envelope msg;
  if (Coin(rng, 20) || !msg.ParseFromArray(data, static_cast<int>(size))) {
    // Not an Envelope (or now and then anyway): byte-level mutation.
    return LLVMFuzzerMutate(data, size, max_size);
  }
  const int mutations = 1 + static_cast<int>(Pick(rng, 3));
  for (int i = 0; i < mutations; ++i) {
    std::vector<Slot> slots;
    CollectSlots(&msg, 0, &slots);
    // Envelope's own fields are slots too: mutating `protocol_version`/`request_id` or setting
    // another oneof member (a different body type) happens through them.
    MutateSlot(slots[Pick(rng, slots.size())], rng, max_size);
  }
  if (!Coin(rng, 10)) msg.set_protocol_version(crux::protocol::kProtocolVersion);
  std::string out;
  if (!msg.SerializeToString(&out) || out.size() > max_size) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  crux::fuzz::CheckFrame(frame);
  // The structure-aware half: whatever parses as an Envelope is checked as a message too, with
  // any protocol_version and with no body (what Decode would refuse first).
  crux::v1::Envelope msg;
  if (size <= crux::protocol::kMaxFrameBytes && msg.ParseFromArray(data, static_cast<int>(size))) {
    crux::fuzz::CheckEnvelope(msg);
  }
  return 0;
}
