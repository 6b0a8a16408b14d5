#include "shm_link.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace ps {

void ShmSend::Commit() {
  if (!link_) return;
  if (fields_.has_offer) link_->OfferSent();
  // The blocks are the receiver's now: nothing to undo.
  blocks_.clear();
  link_.reset();
  ring_.reset();
}

void ShmSend::Cancel() {
  if (!link_) return;
  if (fields_.has_offer) link_->OfferLost();
  std::vector<ShmRing::Block> lent;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (lent_[i]) {
      lent.push_back(blocks_[i]);  // its caller's buffer still: lent again, unpublished
    } else {
      ring_->Cancel(blocks_[i]);
    }
  }
  if (!lent.empty()) link_->ReturnLoans(lent);
  blocks_.clear();
  lent_.clear();
  in_ring_.clear();
  fields_ = ShmFields();
  bytes_ = 0;
  link_.reset();
  ring_.reset();
}

ShmLink::ShmLink(uint64_t ring_bytes, uint64_t min_frame_bytes)
    : ring_bytes_(ring_bytes), min_frame_bytes_(min_frame_bytes) {}

ShmLink::Phase ShmLink::phase() const {
  std::lock_guard<std::mutex> lock(mu_);
  return phase_;
}

void ShmLink::Plan(const Message& msg, bool room_for_offer, ShmSend* send, std::string* error) {
  bool large = false;
  for (const auto& frame : msg.data) large = large || frame.size() >= min_frame_bytes_;
  if (!large) return;
  std::shared_ptr<ShmRing> ring;
  std::vector<ShmRing::Block> loaned(msg.data.size());
  std::vector<bool> is_loan(msg.data.size(), false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ == Phase::kUnoffered && room_for_offer) {
      FillOffer(send, error);
      return;
    }
    if (phase_ != Phase::kAccepted) return;
    ring = ring_;
    for (size_t i = 0; i < msg.data.size() && !loans_.empty(); ++i) {
      is_loan[i] = TakeLoanLocked(msg.data[i], &loaned[i]);
    }
  }
  send->link_ = shared_from_this();
  send->ring_ = ring;
  send->fields_.ring = ring->id();
  send->in_ring_.assign(msg.data.size(), false);
  for (size_t i = 0; i < msg.data.size(); ++i) {
    const SArray<char>& frame = msg.data[i];
    if (frame.size() < min_frame_bytes_) continue;
    ShmRing::Block block = loaned[i];
    if (is_loan[i]) {
      // Written in place by the sender (Lend): nothing to copy.
    } else if (ring->Allocate(frame.size(), &block) ||
               AwaitRoom(ring.get(), frame.size(), &block)) {
      // The one copy of this direction; the receiver reads it where it is.
      std::memcpy(block.payload, frame.data(), frame.size());
    } else {
      ++send->fallbacks_;
      continue;
    }
    ring->Publish(block);
    send->blocks_.push_back(block);
    send->lent_.push_back(is_loan[i]);
    send->in_ring_[i] = true;
    send->bytes_ += frame.size();
    send->fields_.frames.push_back({static_cast<uint32_t>(i), block.offset, block.serial});
  }
  if (send->blocks_.empty()) {
    send->link_.reset();
    send->ring_.reset();
    send->in_ring_.clear();
    send->fields_ = ShmFields();
  }
}

SArray<char> ShmLink::Lend(uint64_t bytes) {
  std::shared_ptr<ShmRing> ring;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ != Phase::kAccepted || bytes < min_frame_bytes_) return {};
    ring = ring_;
  }
  ShmRing::Block block;
  if (bytes > ring->max_payload() || !ring->Allocate(bytes, &block)) return {};
  ring->Prefault(block.offset, shm::kBlockHeaderBytes + block.length);
  {
    std::lock_guard<std::mutex> lock(mu_);
    loans_.emplace(block.payload, block);
  }
  // The deleter keeps the link, and with it the ring's mapping, alive.
  std::shared_ptr<ShmLink> self = shared_from_this();
  return SArray<char>(block.payload, bytes, [self](char* payload) { self->EndLoan(payload); });
}

bool ShmLink::TakeLoanLocked(const SArray<char>& frame, ShmRing::Block* block) {
  auto it = loans_.find(frame.data());
  if (it == loans_.end() || it->second.length != frame.size()) return false;
  *block = it->second;
  loans_.erase(it);
  return true;
}

void ShmLink::ReturnLoans(const std::vector<ShmRing::Block>& blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ShmRing::Block& b : blocks) {
    ring_->Unpublish(b);
    loans_.emplace(b.payload, b);
  }
}

void ShmLink::EndLoan(const char* payload) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loans_.find(payload);
  if (it == loans_.end()) return;  // a sent message took it: the receiver's now
  ring_->Cancel(it->second);
  loans_.erase(it);
}

bool ShmLink::PlanOfferAlone(ShmSend* send, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  return phase_ == Phase::kUnoffered && FillOffer(send, error);
}

void ShmLink::Prefault(uint64_t bytes) {
  std::shared_ptr<ShmRing> ring;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ring = ring_;
  }
  if (ring) ring->Prefault(0, bytes);
}

bool ShmLink::FillOffer(ShmSend* send, std::string* error) {
  if (!ring_) {
    std::unique_ptr<ShmRing> made;
    Status s = ShmRing::Create(ring_bytes_, &made);
    if (!s.ok()) {
      phase_ = Phase::kRefused;
      *error = "cannot make a shared-memory ring: " + s.message();
      return false;
    }
    ring_ = std::move(made);
  }
  send->link_ = shared_from_this();
  send->fields_.has_offer = true;
  send->fields_.offer.ring = ring_->id();
  send->fields_.offer.pid = static_cast<int>(getpid());
  send->fields_.offer.fd = ring_->fd();
  send->fields_.offer.bytes = ring_->bytes();
  send->fields_.offer.token = ring_->token();
  phase_ = Phase::kOffering;
  return true;
}

bool ShmLink::AwaitRoom(ShmRing* ring, uint64_t length, ShmRing::Block* block) {
  // Only space on its way back is worth waiting for (blocks in flight, which the peer
  // frees as it reads its messages; not blocks its app holds), and only about as long
  // as the socket would take for the frame, so a full ring never costs much more than
  // the socket and never blocks for long.
  if (length > ring->max_payload()) return false;
  const auto budget = std::chrono::microseconds(
      std::min<uint64_t>(length / kSocketBytesPerMicrosecond, kMaxWaitForRoomMicros));
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline && ring->HasInFlight()) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (ring->Allocate(length, block)) return true;
  }
  return false;
}

uint64_t ShmLink::ReleaseFreePages() {
  std::shared_ptr<ShmRing> ring;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ring = ring_;
  }
  return ring ? ring->ReleaseFreePages() : 0;
}

bool ShmLink::OnAnswer(const ShmAnswerFields& answer, std::string* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if ((phase_ != Phase::kOffered && phase_ != Phase::kOffering) || !ring_ ||
      answer.ring != ring_->id() || answer.token != ring_->token()) {
    return false;
  }
  if (answer.accepted) {
    phase_ = Phase::kAccepted;
    // The peer has mapped it; the mappings alone keep the memory from now on.
    ring_->CloseFd();
  } else {
    phase_ = Phase::kRefused;
    ring_.reset();
    *reason = answer.reason.empty() ? std::string("no reason given") : answer.reason;
  }
  return true;
}

void ShmLink::OfferSent() {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ == Phase::kOffering) phase_ = Phase::kOffered;
}

void ShmLink::OfferLost() {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ == Phase::kOffering) phase_ = Phase::kUnoffered;
}

}  // namespace ps
