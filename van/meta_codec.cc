#include "meta_codec.h"

#include <limits>
#include <string>

#include "meta.pb.h"

namespace ps {
namespace {

// Bounds on what a peer can make us allocate from the header alone.
constexpr size_t kMaxNodesInControl = 1 << 16;
constexpr size_t kMaxBodyBytes = 64 << 20;
constexpr size_t kMaxIdentityBytes = 255;  // ZeroMQ's limit on routing ids
constexpr size_t kMaxTokenBytes = 1024;
constexpr size_t kMaxShmReasonBytes = 1024;
// Small metas (every KV request and answer) are built and parsed in one protobuf
// message per thread, cleared between uses: its repeated fields keep their room, which
// saves several allocations per message. Others use a message of their own, so that no
// thread keeps the room a large one took: parsed, a meta over this size; built, one
// with a control part (the node table), a body and status message of this size or
// more, or more than kReusedMetaFrames data frames (each has a size, a type and maybe
// a shared-memory descriptor).
constexpr size_t kReusedMetaBytes = 1024;
constexpr size_t kReusedMetaFrames = 16;

// The thread's reusable message, cleared; or `local` for a large meta.
herdps::wire::Meta* MetaFor(bool small, herdps::wire::Meta* local) {
  if (!small) return local;
  thread_local herdps::wire::Meta reused;
  reused.Clear();
  return &reused;
}

void ToWire(const Node& n, herdps::wire::Node* p) {
  p->set_id(n.id);
  p->set_role(static_cast<herdps::wire::Role>(n.role));
  p->set_host(n.host);
  p->set_port(n.port);
  p->set_endpoint(n.endpoint);
  p->set_rank_hint(n.rank_hint);
  p->set_rank(n.rank);
  if (!n.identity.empty()) p->set_identity(n.identity);
  if (!n.control_endpoint.empty()) p->set_control_endpoint(n.control_endpoint);
  p->set_state(static_cast<herdps::wire::NodeState>(n.state));
  if (n.instance) p->set_instance(n.instance);
}

Status FromWire(const herdps::wire::Node& p, Node* n) {
  if (p.role() != herdps::wire::SCHEDULER && p.role() != herdps::wire::SERVER &&
      p.role() != herdps::wire::WORKER) {
    return Status::InvalidArgument("node entry has unknown role " + std::to_string(p.role()));
  }
  n->id = p.id();
  n->role = static_cast<Node::Role>(p.role());
  n->host = p.host();
  n->port = p.port();
  n->endpoint = p.endpoint();
  n->rank_hint = p.rank_hint();
  n->rank = p.rank();
  if (p.identity().size() > kMaxIdentityBytes) {
    return Status::InvalidArgument("node entry has an identity of " +
                                   std::to_string(p.identity().size()) + " bytes");
  }
  n->identity = p.identity();
  n->control_endpoint = p.control_endpoint();
  if (p.instance() < 0 || p.instance() >= Node::kMaxInstances) {
    return Status::InvalidArgument("node entry has instance " + std::to_string(p.instance()));
  }
  n->instance = p.instance();
  if (p.state() < herdps::wire::JOINING || p.state() > herdps::wire::LEAVING) {
    return Status::InvalidArgument("node entry has unknown state " + std::to_string(p.state()));
  }
  n->state = static_cast<Node::State>(p.state());
  return Status::OK();
}

}  // namespace

Status EncodeMeta(const Message& msg, std::string* out) {
  return EncodeMeta(msg, ShmFields(), out);
}

Status EncodeMeta(const Message& msg, const ShmFields& shm, std::string* out) {
  const Meta& m = msg.meta;
  if (m.data_type.size() != msg.data.size()) {
    return Status::Internal("message has " + std::to_string(msg.data.size()) +
                            " data frames but " + std::to_string(m.data_type.size()) +
                            " data types");
  }
  // What the receiver would refuse is refused here, so the sender gets the error.
  if (m.body.size() > kMaxBodyBytes) {
    return Status::InvalidArgument("message body of " + std::to_string(m.body.size()) +
                                   " bytes is over the limit of " +
                                   std::to_string(kMaxBodyBytes) + " bytes");
  }
  if (m.control.token.size() > kMaxTokenBytes) {
    return Status::InvalidArgument("join token longer than " + std::to_string(kMaxTokenBytes) +
                                   " bytes");
  }
  for (const Node& n : m.control.nodes) {
    if (n.identity.size() > kMaxIdentityBytes) {
      return Status::InvalidArgument("node identity longer than " +
                                     std::to_string(kMaxIdentityBytes) + " bytes");
    }
  }
  herdps::wire::Meta local;
  herdps::wire::Meta& p =
      *MetaFor(m.control.empty() && msg.data.size() <= kReusedMetaFrames &&
                   m.body.size() + m.status_message.size() < kReusedMetaBytes,
               &local);
  p.set_head(m.head);
  p.set_app_id(m.app_id);
  p.set_customer_id(m.customer_id);
  p.set_timestamp(m.timestamp);
  p.set_sender(m.sender);
  p.set_recipient(m.recipient);
  p.set_request(m.request);
  p.set_push(m.push);
  p.set_pull(m.pull);
  p.set_simple_app(m.simple_app);
  if (!m.body.empty()) p.set_body(m.body);
  for (size_t i = 0; i < msg.data.size(); ++i) {
    p.add_data_size(msg.data[i].size());
    p.add_data_type(static_cast<herdps::wire::DataType>(m.data_type[i]));
  }
  if (!m.control.empty()) {
    auto* c = p.mutable_control();
    c->set_cmd(static_cast<herdps::wire::Command>(m.control.cmd));
    for (const Node& n : m.control.nodes) ToWire(n, c->add_node());
    c->set_barrier_group(m.control.barrier_group);
    c->set_msg_sig(m.control.msg_sig);
    c->set_consistency(m.control.consistency);
    c->set_staleness(m.control.staleness);
    c->set_key_placement(m.control.key_placement);
    c->set_chunk_bytes(m.control.chunk_bytes);
    c->set_replaces_dead_node(m.control.replaces_dead_node);
    c->set_replication(m.control.replication);
    c->set_replicate_rounds(m.control.replicate_rounds);
    if (!m.control.token.empty()) c->set_token(m.control.token);
    c->set_membership_version(m.control.membership_version);
    c->set_leave_version(m.control.leave_version);
    c->set_retiring(m.control.retiring);
  }
  p.set_status_code(m.status_code);
  if (!m.status_message.empty()) p.set_status_message(m.status_message);
  p.set_priority(m.priority);
  p.set_clock(m.clock);
  p.set_compression(m.compression);
  p.set_pull_compression(m.pull_compression);
  p.set_part(m.part);
  p.set_chunk(m.chunk < 0 ? 0u : static_cast<uint32_t>(m.chunk) + 1);
  p.set_chunk_offset(m.chunk_offset);
  p.set_value_len(m.value_len);
  p.set_chunk_query(m.chunk_query);
  p.set_keys_encoded(m.keys_encoded);
  p.set_key_list(m.key_list);
  p.set_key_list_ref(m.key_list_ref);
  p.set_keys_as_asked(m.keys_as_asked);
  p.set_rounds_copied_below(m.rounds_copied_below < 0
                                ? 0u
                                : static_cast<uint64_t>(m.rounds_copied_below) + 1);
  p.set_rounds_resent(m.rounds_resent);
  p.set_key_list_unknown(m.key_list_unknown);
  p.set_takes_chunks(m.takes_chunks);
  p.set_replica_of(m.replica_of < 0 ? 0u : static_cast<uint32_t>(m.replica_of) + 1);
  p.set_resent(m.resent);
  p.set_origin_request(m.origin_request);
  p.set_origin_customer(m.origin_customer);
  p.set_first_server(m.first_server < 0 ? 0u : static_cast<uint32_t>(m.first_server) + 1);
  p.set_first_part(m.first_part < 0 ? 0u : static_cast<uint32_t>(m.first_part + 1));
  p.set_sequence(m.sequence);
  p.set_request_id(m.request_id);
  p.set_incarnation(m.incarnation);
  // Read only by the resend de-dup (messages with a sequence); control messages keep it,
  // their bytes do not matter. 10 bytes fewer on every other message.
  if (m.sequence != 0 || !m.control.empty()) p.set_sender_incarnation(m.sender_incarnation);
  if (shm.has_offer) {
    auto* o = p.mutable_shm_offer();
    o->set_ring(shm.offer.ring);
    o->set_pid(shm.offer.pid);
    o->set_fd(shm.offer.fd);
    o->set_bytes(shm.offer.bytes);
    o->set_token(shm.offer.token);
  }
  if (!shm.frames.empty()) {
    p.set_shm_ring(shm.ring);
    for (const ShmFrameRef& f : shm.frames) {
      if (f.index >= msg.data.size()) {
        return Status::Internal("shared-memory descriptor for data frame " +
                                std::to_string(f.index) + " of " +
                                std::to_string(msg.data.size()));
      }
      auto* d = p.add_shm_frame();
      d->set_index(f.index);
      d->set_offset(f.offset);
      d->set_serial(f.serial);
    }
  }
  if (!p.SerializeToString(out)) return Status::Internal("meta does not serialise");
  return Status::OK();
}

Status DecodeMeta(const void* bytes, size_t size, const std::vector<size_t>& frame_sizes,
                  Meta* meta) {
  ShmFields shm;
  Status s = DecodeMeta(bytes, size, frame_sizes, meta, &shm);
  if (s.ok() && !shm.empty()) {
    return Status::InvalidArgument("meta carries shared-memory fields where none are taken");
  }
  return s;
}

namespace {

// The van-private fields' shape (see DecodeMeta); marks the frames they carry.
Status DecodeShmFields(const herdps::wire::Meta& p, size_t frames, ShmFields* shm,
                       std::vector<bool>* in_shm) {
  *shm = ShmFields();
  in_shm->assign(frames, false);
  if (p.has_shm_offer()) {
    const auto& o = p.shm_offer();
    if (o.ring() == 0 || o.pid() <= 0 || o.fd() < 0 || o.bytes() == 0 ||
        o.token().size() != kShmTokenBytes) {
      return Status::InvalidArgument("incomplete shared-memory offer");
    }
    shm->has_offer = true;
    shm->offer.ring = o.ring();
    shm->offer.pid = o.pid();
    shm->offer.fd = o.fd();
    shm->offer.bytes = o.bytes();
    shm->offer.token = o.token();
  }
  if (p.shm_frame_size() == 0) return Status::OK();
  if (p.shm_ring() == 0) {
    return Status::InvalidArgument("shared-memory frames without a ring");
  }
  if (static_cast<size_t>(p.shm_frame_size()) > frames) {
    return Status::InvalidArgument(std::to_string(p.shm_frame_size()) +
                                   " shared-memory descriptors for " + std::to_string(frames) +
                                   " data frames");
  }
  shm->ring = p.shm_ring();
  for (const auto& f : p.shm_frame()) {
    if (f.index() >= frames || (!shm->frames.empty() && f.index() <= shm->frames.back().index)) {
      return Status::InvalidArgument("shared-memory descriptor for data frame " +
                                     std::to_string(f.index()) +
                                     " is out of range or out of order");
    }
    shm->frames.push_back({f.index(), f.offset(), f.serial()});
    (*in_shm)[f.index()] = true;
  }
  return Status::OK();
}

}  // namespace

std::string EncodeShmAnswer(const ShmAnswerFields& answer) {
  herdps::wire::ShmAnswer p;
  p.set_ring(answer.ring);
  p.set_token(answer.token);
  p.set_accepted(answer.accepted);
  if (!answer.reason.empty()) {
    p.set_reason(answer.reason.substr(0, kMaxShmReasonBytes));
  }
  return p.SerializeAsString();
}

Status DecodeShmAnswer(const void* bytes, size_t size, ShmAnswerFields* answer) {
  herdps::wire::ShmAnswer p;
  if (size > kMaxShmReasonBytes * 2 || !p.ParseFromArray(bytes, static_cast<int>(size))) {
    return Status::InvalidArgument("shared-memory answer of " + std::to_string(size) +
                                   " bytes does not parse");
  }
  if (p.ring() == 0 || p.token().size() != kShmTokenBytes ||
      p.reason().size() > kMaxShmReasonBytes) {
    return Status::InvalidArgument("malformed shared-memory answer");
  }
  answer->ring = p.ring();
  answer->token = p.token();
  answer->accepted = p.accepted();
  answer->reason = p.reason();
  return Status::OK();
}

Status DecodeMeta(const void* bytes, size_t size, const std::vector<size_t>& frame_sizes,
                  Meta* meta, ShmFields* shm) {
  herdps::wire::Meta local;
  herdps::wire::Meta& p = *MetaFor(size <= kReusedMetaBytes, &local);
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !p.ParseFromArray(bytes, static_cast<int>(size))) {
    return Status::InvalidArgument("meta frame of " + std::to_string(size) +
                                   " bytes does not parse");
  }
  if (static_cast<size_t>(p.data_size_size()) != frame_sizes.size()) {
    return Status::InvalidArgument("meta declares " + std::to_string(p.data_size_size()) +
                                   " data frames but " + std::to_string(frame_sizes.size()) +
                                   " arrived");
  }
  if (p.data_type_size() != p.data_size_size()) {
    return Status::InvalidArgument("meta declares " + std::to_string(p.data_size_size()) +
                                   " frame sizes but " + std::to_string(p.data_type_size()) +
                                   " frame types");
  }
  std::vector<bool> in_shm;
  Status shm_status = DecodeShmFields(p, frame_sizes.size(), shm, &in_shm);
  if (!shm_status.ok()) return shm_status;
  meta->data_type.clear();
  for (size_t i = 0; i < frame_sizes.size(); ++i) {
    int type = p.data_type(static_cast<int>(i));
    if (type < 0 || type > static_cast<int>(DataType::kOther)) {
      return Status::InvalidArgument("data frame " + std::to_string(i) + " has unknown type " +
                                     std::to_string(type));
    }
    const uint64_t declared = p.data_size(static_cast<int>(i));
    if (in_shm[i]) {
      // In shared memory: an empty frame on the wire, the real size declared.
      if (frame_sizes[i] != 0 || declared == 0) {
        return Status::InvalidArgument("data frame " + std::to_string(i) +
                                       " is in shared memory but carries " +
                                       std::to_string(frame_sizes[i]) + " bytes and declares " +
                                       std::to_string(declared));
      }
    } else if (declared != frame_sizes[i]) {
      return Status::InvalidArgument("data frame " + std::to_string(i) + " declares " +
                                     std::to_string(declared) + " bytes but carries " +
                                     std::to_string(frame_sizes[i]));
    }
    DataType dt = static_cast<DataType>(type);
    if (declared % DataTypeSize(dt) != 0) {
      return Status::InvalidArgument("data frame " + std::to_string(i) + " has " +
                                     std::to_string(declared) +
                                     " bytes, not a whole number of " + DataTypeName(dt));
    }
    meta->data_type.push_back(dt);
  }
  for (ShmFrameRef& f : shm->frames) f.length = p.data_size(static_cast<int>(f.index));
  if (p.body().size() > kMaxBodyBytes) {
    return Status::InvalidArgument("meta body of " + std::to_string(p.body().size()) +
                                   " bytes is over the limit");
  }
  meta->head = p.head();
  meta->app_id = p.app_id();
  meta->customer_id = p.customer_id();
  meta->timestamp = p.timestamp();
  meta->sender = p.sender();
  meta->recipient = p.recipient();
  meta->request = p.request();
  meta->push = p.push();
  meta->pull = p.pull();
  meta->simple_app = p.simple_app();
  meta->body = p.body();
  meta->status_code = p.status_code();
  meta->status_message = p.status_message();
  meta->priority = p.priority();
  meta->clock = p.clock();
  meta->compression = p.compression();
  meta->pull_compression = p.pull_compression();
  meta->part = p.part();
  if (p.chunk() > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument("chunk index " + std::to_string(p.chunk()) + " is out of range");
  }
  meta->chunk = static_cast<int32_t>(p.chunk()) - 1;
  meta->chunk_offset = p.chunk_offset();
  meta->value_len = p.value_len();
  meta->chunk_query = p.chunk_query();
  meta->keys_encoded = p.keys_encoded();
  meta->key_list = p.key_list();
  meta->key_list_ref = p.key_list_ref();
  meta->keys_as_asked = p.keys_as_asked();
  // 1 + a clock of 0 .. 2^63 - 1 (the last one: every clock ended).
  if (p.rounds_copied_below() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1) {
    return Status::InvalidArgument("rounds_copied_below " +
                                   std::to_string(p.rounds_copied_below()) + " is out of range");
  }
  meta->rounds_copied_below = static_cast<int64_t>(p.rounds_copied_below() - 1);
  meta->rounds_resent = p.rounds_resent();
  meta->key_list_unknown = p.key_list_unknown();
  meta->takes_chunks = p.takes_chunks();
  if (p.replica_of() > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument("replica_of " + std::to_string(p.replica_of()) +
                                   " is out of range");
  }
  meta->replica_of = static_cast<int32_t>(p.replica_of()) - 1;
  meta->resent = p.resent();
  meta->origin_request = p.origin_request();
  meta->origin_customer = p.origin_customer();
  if (p.first_server() > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument("first_server " + std::to_string(p.first_server()) +
                                   " is out of range");
  }
  meta->first_server = static_cast<int32_t>(p.first_server()) - 1;
  meta->first_part = static_cast<int64_t>(p.first_part()) - 1;
  meta->sequence = p.sequence();
  meta->request_id = p.request_id();
  meta->incarnation = p.incarnation();
  meta->sender_incarnation = p.sender_incarnation();
  meta->control = Control();
  if (p.has_control()) {
    const auto& c = p.control();
    if (c.cmd() < herdps::wire::DATA || c.cmd() > Control::kLastCommand) {
      return Status::InvalidArgument("unknown control command " + std::to_string(c.cmd()));
    }
    if (static_cast<size_t>(c.node_size()) > kMaxNodesInControl) {
      return Status::InvalidArgument("control lists " + std::to_string(c.node_size()) +
                                     " nodes, over the limit");
    }
    meta->control.cmd = static_cast<Control::Command>(c.cmd());
    meta->control.barrier_group = c.barrier_group();
    meta->control.msg_sig = c.msg_sig();
    meta->control.consistency = c.consistency();
    meta->control.staleness = c.staleness();
    meta->control.key_placement = c.key_placement();
    meta->control.chunk_bytes = c.chunk_bytes();
    meta->control.replaces_dead_node = c.replaces_dead_node();
    meta->control.replication = c.replication() > 0 ? c.replication() : 1;
    meta->control.replicate_rounds = c.replicate_rounds();
    if (c.token().size() > kMaxTokenBytes) {
      return Status::InvalidArgument("join token of " + std::to_string(c.token().size()) +
                                     " bytes is over the limit");
    }
    meta->control.token = c.token();
    meta->control.membership_version = c.membership_version();
    meta->control.leave_version = c.leave_version();
    meta->control.retiring = c.retiring();
    for (const auto& pn : c.node()) {
      Node n;
      Status s = FromWire(pn, &n);
      if (!s.ok()) return s;
      meta->control.nodes.push_back(std::move(n));
    }
  }
  return Status::OK();
}

}  // namespace ps
