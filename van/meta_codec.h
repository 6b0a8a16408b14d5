// Meta <-> wire bytes, with validation. Internal to the van.
#ifndef HERDPS_VAN_META_CODEC_H_
#define HERDPS_VAN_META_CODEC_H_

#include <string>
#include <vector>

#include "ps/internal/message.h"
#include "ps/status.h"

namespace ps {

// Serialises msg.meta, recording the size and type of every data frame so the
// receiver can check them. Returns an error (and writes nothing) when the message
// is inconsistent, e.g. a data_type list that does not match the frames.
Status EncodeMeta(const Message& msg, std::string* out);

// Parses a meta frame and validates it against the sizes of the data frames that
// arrived with it: the frame count must match, every size must equal the declared
// size and be a whole number of elements of the declared type, and enums must be
// known. On error `meta` is unspecified and the Status says what was wrong.
Status DecodeMeta(const void* bytes, size_t size, const std::vector<size_t>& frame_sizes,
                  Meta* meta);

}  // namespace ps

#endif  // HERDPS_VAN_META_CODEC_H_
