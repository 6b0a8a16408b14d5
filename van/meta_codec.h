// Meta <-> wire bytes, with validation. Internal to the van.
#ifndef HERDPS_VAN_META_CODEC_H_
#define HERDPS_VAN_META_CODEC_H_

#include <string>
#include <vector>

#include "ps/internal/message.h"
#include "ps/status.h"
#include "shm_wire.h"

namespace ps {

// Serialises msg.meta, recording the size and type of every data frame so the
// receiver can check them. Returns an error (and writes nothing) when the message
// is inconsistent, e.g. a data_type list that does not match the frames.
Status EncodeMeta(const Message& msg, std::string* out);

// The same, with the van-private shared-memory fields: the frames `shm.frames` names
// still declare their real size (msg.data[i].size()) although the sender puts an
// empty frame on the wire for each.
Status EncodeMeta(const Message& msg, const ShmFields& shm, std::string* out);

// Parses a meta frame and validates it against the sizes of the data frames that
// arrived with it: the frame count must match, every size must equal the declared
// size and be a whole number of elements of the declared type, and enums must be
// known. On error `meta` is unspecified and the Status says what was wrong.
Status DecodeMeta(const void* bytes, size_t size, const std::vector<size_t>& frame_sizes,
                  Meta* meta);

// The same, also taking the shared-memory fields into `shm`. A frame the meta says is
// in shared memory must arrive empty; its declared size is the one checked against
// its type. The descriptors are checked for shape only (at most one per frame,
// ascending, a ring named, an offer complete); whether they point at a valid block is
// the ring mapping's check (ShmMapping::Claim). The overload without `shm` refuses a
// meta that has any of these fields.
Status DecodeMeta(const void* bytes, size_t size, const std::vector<size_t>& frame_sizes,
                  Meta* meta, ShmFields* shm);

// A receiver's answer to a shared-memory offer, and its parser (InvalidArgument for
// anything that is not a well-formed answer).
std::string EncodeShmAnswer(const ShmAnswerFields& answer);
Status DecodeShmAnswer(const void* bytes, size_t size, ShmAnswerFields* answer);

}  // namespace ps

#endif  // HERDPS_VAN_META_CODEC_H_
