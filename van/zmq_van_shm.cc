// ZmqVan's shared-memory path (docs/architecture.md, "Shared memory"): which peers are
// on this host, the sender's plan and the offer's answer, and the receiver's checks of
// the descriptors a message carries.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "meta_codec.h"
#include "ps/internal/large_buffer.h"
#include "zmq_van.h"

namespace ps {

// The addresses of this host's interfaces, as text.
std::unordered_set<std::string> ZmqVan::LocalAddresses() {
  std::unordered_set<std::string> found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN];
    if (it->ifa_addr->sa_family == AF_INET) {
      auto* sin = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
      if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf))) found.insert(buf);
    } else if (it->ifa_addr->sa_family == AF_INET6) {
      auto* sin6 = reinterpret_cast<sockaddr_in6*>(it->ifa_addr);
      if (inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf))) found.insert(buf);
    }
  }
  freeifaddrs(list);
  return found;
}

bool ZmqVan::OnThisHost(const std::string& endpoint) const {
  if (endpoint.rfind("ipc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string host = endpoint.substr(6, endpoint.rfind(':') - 6);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host.rfind("127.", 0) == 0 || host == "::1" || local_hosts_.count(host) > 0;
}

void ZmqVan::ReadShmAnswers(Link* link) {
  // The peer's answers are the only messages that ever come back on a DEALER.
  for (;;) {
    zmq_msg_t answer;
    zmq_msg_init(&answer);
    if (zmq_msg_recv(&answer, link->socket, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&answer);
      return;
    }
    bool more = zmq_msg_more(&answer);
    ShmAnswerFields fields;
    Status s = DecodeShmAnswer(zmq_msg_data(&answer), zmq_msg_size(&answer), &fields);
    zmq_msg_close(&answer);
    while (more) {  // not an answer of ours: discard the rest of it
      zmq_msg_t rest;
      zmq_msg_init(&rest);
      if (zmq_msg_recv(&rest, link->socket, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rest);
        break;
      }
      more = zmq_msg_more(&rest);
      zmq_msg_close(&rest);
      s = Status::InvalidArgument("a multipart answer");
    }
    std::string reason;
    if (!s.ok() || !link->shm || !link->shm->OnAnswer(fields, &reason)) continue;
    if (fields.accepted) {
      shm_accepted_rings_.fetch_add(1, std::memory_order_relaxed);
      VLOG(1) << "shared memory to " << link->endpoint << " accepted";
    } else {
      shm_refused_rings_.fetch_add(1, std::memory_order_relaxed);
      if (shm_log_.ShouldLog()) {
        LOG(WARNING) << "the peer at " << link->endpoint
                     << " refused shared memory; large frames to it go on the socket ("
                     << reason << ")";
      }
    }
  }
}

std::shared_ptr<ShmLink> ZmqVan::ShmOf(Link* link) {
  std::lock_guard<std::mutex> lock(link->mu);
  if (!link->shm_possible || !link->socket) return nullptr;
  if (!link->shm) link->shm = std::make_shared<ShmLink>(options_.zmq.shm_bytes, kShmMinFrameBytes);
  if (link->shm->phase() == ShmLink::Phase::kOffered) ReadShmAnswers(link);
  return link->shm;
}

uint64_t ZmqVan::RingBytesFor(const std::vector<uint64_t>& sizes) {
  // Blocks are taken from the ring's start: its own 4 KiB, then 64 bytes of header and
  // the payload (64-byte aligned) per large frame.
  uint64_t bytes = 4096;
  for (uint64_t size : sizes) bytes += size >= kShmMinFrameBytes ? size + 128 : 0;
  return bytes;
}

void ZmqVan::PlanShm(Link* link, const Message& msg, bool room_for_offer, ShmSend* send) {
  bool large = false;
  for (const auto& frame : msg.data) large = large || frame.size() >= kShmMinFrameBytes;
  if (!large) return;
  std::shared_ptr<ShmLink> shm = ShmOf(link);
  if (!shm) return;
  if (room_for_offer && shm->phase() == ShmLink::Phase::kUnoffered) {
    std::vector<uint64_t> sizes;
    for (const auto& frame : msg.data) sizes.push_back(frame.size());
    OfferRingAhead(link, msg.meta.sender, msg.meta.recipient, RingBytesFor(sizes),
                   /*prefault=*/true, shm);
  }
  std::string error;
  shm->Plan(msg, room_for_offer, send, &error);
  if (!error.empty() && shm_log_.ShouldLog()) {
    LOG(WARNING) << error << "; large frames to " << link->endpoint << " go on the socket";
  }
}

std::vector<SArray<char>> ZmqVan::LendSendBuffers(int sender, int recipient,
                                                  const std::vector<uint64_t>& sizes) {
  std::vector<SArray<char>> lent(sizes.size());
  const uint64_t bytes = RingBytesFor(sizes);
  if (!shm_on_.load(std::memory_order_relaxed) || bytes == RingBytesFor({})) return lent;
  std::shared_ptr<Peer> peer = FindPeer(recipient);
  if (!peer) return lent;
  Link* link = &peer->links[static_cast<int>(Channel::kData)];
  std::shared_ptr<ShmLink> shm = ShmOf(link);
  if (!shm) return lent;
  // Lend pages each block itself (only the blocks it hands out are touched).
  if (shm->phase() == ShmLink::Phase::kUnoffered) {
    OfferRingAhead(link, sender, recipient, bytes, /*prefault=*/false, shm);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] >= kShmMinFrameBytes) lent[i] = shm->Lend(sizes[i]);
  }
  return lent;
}

void ZmqVan::OfferRingAhead(Link* link, int sender, int recipient, uint64_t bytes, bool prefault,
                            const std::shared_ptr<ShmLink>& shm) {
  ShmSend offer;
  std::string error;
  if (!shm->PlanOfferAlone(&offer, &error)) {
    if (!error.empty() && shm_log_.ShouldLog()) {
      LOG(WARNING) << error << "; large frames to " << link->endpoint << " go on the socket";
    }
    return;
  }
  // A message without data frames: the receiving van answers its offer and drops it.
  Message alone;
  alone.meta.sender = sender;
  alone.meta.recipient = recipient;
  std::string meta;
  if (!EncodeMeta(alone, offer.fields(), &meta).ok()) return;  // the offer undoes itself
  {
    std::lock_guard<std::mutex> lock(link->mu);
    if (!link->socket || link->shm != shm) return;
    if (zmq_send(link->socket, meta.data(), meta.size(), ZMQ_DONTWAIT) < 0) return;
    offer.Commit();
  }
  // While the peer maps the ring: the pages the frames will take, made resident at
  // once. Only while they all fit: a frame that does not goes on the socket, and pages
  // made resident for nothing would stay so.
  if (prefault && bytes <= options_.zmq.shm_bytes) shm->Prefault(bytes);
  // A receiver busy with another peer's large message answers late (two workers'
  // first pushes to one server): a message whose frames would take longer on the
  // socket waits as long as the socket would take, which it then never exceeds.
  int64_t wait_ms = options_.zmq.shm_offer_wait_ms;
  if (wait_ms > 0) {
    const uint64_t in_ring = std::min<uint64_t>(bytes, options_.zmq.shm_bytes);
    wait_ms = std::max<int64_t>(wait_ms, static_cast<int64_t>(in_ring / kFreshSocketBytesPerMs));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(link->mu);
      if (!link->socket || link->shm != shm) return;
      ReadShmAnswers(link);
    }
    if (shm->phase() != ShmLink::Phase::kOffered) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void ZmqVan::AnswerShmOffer(void* socket, const std::string& identity,
                            const ShmOfferFields& offer) {
  ShmAnswerFields answer;
  if (options_.zmq.shm) {
    answer = shm_receiver_.HandleOffer(identity, offer);
  } else {
    answer.ring = offer.ring;
    answer.token = offer.token;
    answer.reason = "PS_SHM=0 on the receiver";
  }
  if (!answer.accepted && shm_log_.ShouldLog()) {
    LOG(WARNING) << "refused a peer's shared-memory ring: " << answer.reason;
  }
  // Back on the connection the offer came on: the ROUTER routes by its identity. A
  // full queue or a gone peer loses the answer, and the sender stays on the socket.
  std::string bytes = EncodeShmAnswer(answer);
  if (zmq_send(socket, identity.data(), identity.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
    zmq_send(socket, bytes.data(), bytes.size(), ZMQ_DONTWAIT);
  }
}

void ZmqVan::DiscardShmFrames(const std::string& identity, const ShmFields& shm) {
  std::shared_ptr<ShmMapping> mapping = shm_receiver_.Find(identity, shm.ring);
  if (!mapping) return;
  for (const ShmFrameRef& ref : shm.frames) {
    char* payload = nullptr;
    if (mapping->Claim(ref, ref.length, &payload).ok()) mapping->Release(ref.offset, ref.length);
  }
}

Status ZmqVan::AdoptShmFrames(const std::string& identity, const ShmFields& shm,
                              std::vector<SArray<char>>* data, const Meta& meta) {
  std::shared_ptr<ShmMapping> mapping = shm_receiver_.Find(identity, shm.ring);
  if (!mapping) {
    return Status::InvalidArgument("shared-memory frames in a ring this connection never offered");
  }
  std::vector<std::pair<const ShmFrameRef*, char*>> claimed;
  Status failed;
  // Every descriptor is tried, so that a message dropped for one bad descriptor still
  // frees the blocks of its good ones.
  for (const ShmFrameRef& ref : shm.frames) {
    char* payload = nullptr;
    Status s = mapping->Claim(ref, ref.length, &payload);
    if (s.ok()) {
      claimed.emplace_back(&ref, payload);
    } else if (failed.ok()) {
      failed = s;
    }
  }
  if (!failed.ok()) {
    for (const auto& c : claimed) mapping->Release(c.first->offset, c.first->length);
    return failed;
  }
  uint64_t bytes = 0;
  for (const auto& [ref, payload] : claimed) {
    const DataType type = meta.data_type[ref->index];
    const uint64_t offset = ref->offset, length = ref->length;
    bytes += length;
    // The peer can write into the block after every check, so only values (never used
    // as a size or an index) are handed over in place; keys, lens and codec frames are
    // copied out before anyone parses them. Views are also capped at half the ring, so
    // that what an app keeps (a server storing pushes by reference) never fills the
    // sender's ring: past that, frames are copied out and their blocks freed at once.
    if ((type == DataType::kFloat || type == DataType::kDouble) &&
        mapping->held_bytes() <= mapping->bytes() / 2) {
      (*data)[ref->index] = SArray<char>(
          payload, length, [mapping, offset, length](char*) { mapping->Release(offset, length); });
    } else {
      SArray<char> copy = NewLargeBuffer(length);
      std::memcpy(copy.data(), payload, length);
      mapping->Release(offset, length);
      (*data)[ref->index] = copy;
      shm_copied_bytes_.fetch_add(length, std::memory_order_relaxed);
    }
  }
  shm_received_frames_.fetch_add(claimed.size(), std::memory_order_relaxed);
  shm_received_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return Status::OK();
}

uint64_t ZmqVan::ReleaseIdleMemory() {
  std::vector<std::shared_ptr<ShmLink>> rings;
  {
    std::shared_lock<std::shared_mutex> lock(peers_mu_);
    for (auto& kv : peers_) {
      Link& link = kv.second->links[static_cast<int>(Channel::kData)];
      std::lock_guard<std::mutex> link_lock(link.mu);
      if (link.shm) rings.push_back(link.shm);
    }
  }
  uint64_t released = 0;
  for (const auto& ring : rings) released += ring->ReleaseFreePages();
  return released;
}

}  // namespace ps
