// order_replay: runs the order plugin's own balancing code (ps/internal/order_balancer.h) on
// recorded gradients, and prints CD-GraB's signs and next orders and ID-GraB's next orders.
//
//   build/apps/order_replay CASE.json        (- reads standard input)
//
// CASE.json: {"m": M, "n": N, "d": D, "orders": [M][N] ints, "grads": [N][M][D] numbers},
// where grads[j][i] is worker i's gradient at its local step j, that is of its example
// orders[i][j]. Gradients are read as floats and each pair difference is taken in float, as
// a worker computes it; dot products accumulate in float64 from left to right, so
// integer-valued inputs give exact results. Other keys are ignored.
//
// Prints {"cdgrab_signs": [N/2][M] of +1/-1, "cdgrab_next_orders": [M][N],
// "idgrab_next_orders": [M][N]}. Exit status 0, or 2 with a message on stderr when the input
// cannot be read, is not JSON, or does not fit together.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/order_balancer.h"

namespace {

// Anything wrong with the input; main prints it and exits 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  double number = 0;                                  // kNumber; kBool: 0 or 1
  std::string text;                                   // kString
  std::vector<Json> items;                            // kArray
  std::vector<std::pair<std::string, Json>> members;  // kObject, in file order
};

// A small recursive-descent reader for RFC 8259 JSON: enough for a case file, with errors
// that name the line and column.
class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : text_(text) {}

  Json ReadDocument() {
    Json value = ReadValue(0);
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the JSON value");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void Fail(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      column = text_[i] == '\n' ? 1 : column + 1;
      line += text_[i] == '\n';
    }
    throw InputError("not valid JSON at line " + std::to_string(line) + ", column " +
                     std::to_string(column) + ": " + what);
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\n')) {
      ++pos_;
    }
  }
  // Consumes `c` if it comes next (after white space).
  bool Take(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void Expect(char c) {
    if (!Peek(c)) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  Json ReadValue(int depth) {
    if (depth > kMaxDepth) Fail("nested deeper than " + std::to_string(kMaxDepth));
    SkipSpace();
    if (pos_ >= text_.size()) Fail("unexpected end of input");
    Json v;
    const char c = text_[pos_];
    if (c == '{') {
      v.kind = Json::kObject;
      ++pos_;
      if (Take('}')) return v;
      do {
        if (!Peek('"')) Fail("expected a string key");
        std::string key = ReadString();
        for (const auto& m : v.members)
          if (m.first == key) Fail("duplicate key \"" + key + "\"");
        Expect(':');
        v.members.emplace_back(std::move(key), ReadValue(depth + 1));
      } while (Take(','));
      Expect('}');
    } else if (c == '[') {
      v.kind = Json::kArray;
      ++pos_;
      if (Take(']')) return v;
      do v.items.push_back(ReadValue(depth + 1));
      while (Take(','));
      Expect(']');
    } else if (c == '"') {
      v.kind = Json::kString;
      v.text = ReadString();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::kNumber;
      v.number = ReadNumber();
    } else {
      for (const char* word : {"true", "false", "null"}) {
        if (text_.compare(pos_, std::strlen(word), word) == 0) {
          pos_ += std::strlen(word);
          v.kind = word[0] == 'n' ? Json::kNull : Json::kBool;
          v.number = word[0] == 't';
          return v;
        }
      }
      Fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  double ReadNumber() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      if (pos_ == from) Fail("expected a digit");
    };
    if (text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else {
      digits();
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      digits();
    }
    const std::string token = text_.substr(start, pos_ - start);
    const double value = std::strtod(token.c_str(), nullptr);
    if (!std::isfinite(value)) {
      pos_ = start;
      Fail("number " + token + " is out of range");
    }
    return value;
  }

  std::string ReadString() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) Fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) Fail("unterminated string");
      const char e = text_[pos_++];
      const std::string from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
      if (const size_t at = from.find(e); at != std::string::npos) {
        out += to[at];
      } else if (e == 'u') {
        // Keys and values here are ASCII; other code points are kept as UTF-8 bytes (a
        // surrogate pair as two 3-byte sequences: nothing here compares them).
        const std::string hex = text_.substr(pos_, 4);
        if (hex.size() != 4 || hex.find_first_not_of("0123456789abcdefABCDEF") != hex.npos) {
          Fail("bad \\u escape");
        }
        const unsigned long cp = std::strtoul(hex.c_str(), nullptr, 16);
        pos_ += 4;
        if (cp < 0x80) {
          out += static_cast<char>(cp);
        } else if (cp < 0x800) {
          out += static_cast<char>(0xc0 | (cp >> 6));
          out += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
          out += static_cast<char>(0xe0 | (cp >> 12));
          out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
          out += static_cast<char>(0x80 | (cp & 0x3f));
        }
      } else {
        Fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  const std::string& text_;
  size_t pos_ = 0;
};

// Typed access to the case, with errors that name the path of the offending value.
const Json& Member(const Json& object, const std::string& key) {
  for (const auto& m : object.members)
    if (m.first == key) return m.second;
  throw InputError("missing key \"" + key + "\"");
}

const std::vector<Json>& ArrayOf(const Json& v, size_t size, const std::string& path) {
  if (v.kind != Json::kArray) throw InputError(path + " must be an array");
  if (v.items.size() != size) {
    throw InputError(path + " has " + std::to_string(v.items.size()) + " entries, expected " +
                     std::to_string(size));
  }
  return v.items;
}

int Int(const Json& v, int min, const std::string& path) {
  if (v.kind != Json::kNumber || v.number != std::floor(v.number) || v.number < min ||
      v.number > std::numeric_limits<int>::max()) {
    throw InputError(path + " must be an integer >= " + std::to_string(min));
  }
  return static_cast<int>(v.number);
}

float Float(const Json& v, const std::string& path) {
  if (v.kind != Json::kNumber) throw InputError(path + " must be a number");
  const float f = static_cast<float>(v.number);
  if (!std::isfinite(f)) throw InputError(path + " does not fit in a float");
  return f;
}

struct Case {
  int m = 0, n = 0, d = 0;
  std::vector<std::vector<int>> orders;  // [m][n]
  std::vector<float> grads;              // [n][m][d], flattened
  const float* Grad(int step, int worker) const {
    return &grads[(static_cast<size_t>(step) * m + worker) * d];
  }
};

Case ReadCase(const Json& doc) {
  if (doc.kind != Json::kObject) throw InputError("the case must be a JSON object");
  Case c;
  c.m = Int(Member(doc, "m"), 1, "m");
  c.n = Int(Member(doc, "n"), 0, "n");
  c.d = Int(Member(doc, "d"), 1, "d");
  const auto& orders = ArrayOf(Member(doc, "orders"), c.m, "orders");
  for (int i = 0; i < c.m; ++i) {
    const std::string path = "orders[" + std::to_string(i) + "]";
    c.orders.emplace_back();
    for (const Json& e : ArrayOf(orders[i], c.n, path)) c.orders.back().push_back(Int(e, 0, path));
  }
  const auto& grads = ArrayOf(Member(doc, "grads"), c.n, "grads");
  c.grads.reserve(static_cast<size_t>(c.n) * c.m * c.d);
  for (int j = 0; j < c.n; ++j) {
    const std::string step = "grads[" + std::to_string(j) + "]";
    const auto& workers = ArrayOf(grads[j], c.m, step);
    for (int i = 0; i < c.m; ++i) {
      const std::string path = step + "[" + std::to_string(i) + "]";
      for (const Json& x : ArrayOf(workers[i], c.d, path)) c.grads.push_back(Float(x, path));
    }
  }
  return c;
}

void Check(const ps::Status& s) {
  if (!s.ok()) throw InputError(s.message());
}

// Feeds the case's pairs of `workers` (pair index outer, worker inner) to `balancer`, whose
// worker w is the case's worker workers[w].
void Feed(const Case& c, const std::vector<int>& workers, ps::PairBalancer* balancer) {
  std::vector<std::vector<int>> orders;
  for (int i : workers) orders.push_back(c.orders[i]);
  Check(balancer->BeginEpoch(std::move(orders)));
  std::vector<float> diff(c.d);
  for (int k = 0; k < c.n / 2; ++k) {
    for (size_t w = 0; w < workers.size(); ++w) {
      const float* first = c.Grad(2 * k, workers[w]);
      const float* second = c.Grad(2 * k + 1, workers[w]);
      for (int j = 0; j < c.d; ++j) diff[j] = first[j] - second[j];
      ps::Status s = balancer->AddPair(static_cast<int>(w), k, diff.data(), diff.size());
      if (!s.ok()) {
        throw InputError("worker " + std::to_string(workers[w]) + ", steps " +
                         std::to_string(2 * k) + " and " + std::to_string(2 * k + 1) + ": " +
                         s.message());
      }
    }
  }
}

std::string Row(const std::vector<int>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::string Rows(const std::vector<std::vector<int>>& rows) {
  std::string out = "[";
  for (size_t i = 0; i < rows.size(); ++i) out += (i ? ",\n    " : "\n    ") + Row(rows[i]);
  return out + (rows.empty() ? "]" : "\n  ]");
}

std::string Replay(const Case& c) {
  std::vector<int> all(c.m);
  for (int i = 0; i < c.m; ++i) all[i] = i;
  ps::PairBalancer cdgrab(c.m, c.n, c.d);
  Feed(c, all, &cdgrab);
  std::vector<std::vector<int>> signs(c.n / 2), cd_next(c.m), id_next(c.m);
  for (int k = 0; k < c.n / 2; ++k)
    for (int i = 0; i < c.m; ++i) signs[k].push_back(cdgrab.Sign(i, k));
  for (int i = 0; i < c.m; ++i) {
    Check(cdgrab.NextOrder(i, &cd_next[i]));
    ps::PairBalancer idgrab(1, c.n, c.d);  // ID-GraB: the worker's own pairs, its own h
    Feed(c, {i}, &idgrab);
    Check(idgrab.NextOrder(0, &id_next[i]));
  }
  return "{\n  \"cdgrab_signs\": " + Rows(signs) + ",\n  \"cdgrab_next_orders\": " + Rows(cd_next) +
         ",\n  \"idgrab_next_orders\": " + Rows(id_next) + "\n}\n";
}

std::string ReadInput(const std::string& name) {
  if (name == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::ifstream in(name, std::ios::binary);
  if (!in) throw InputError("cannot open " + name + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError("cannot read " + name);
  return text.str();
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: %s CASE.json   (- for standard input)\n"
                 "  CASE.json: {\"m\": M, \"n\": N, \"d\": D, \"orders\": [M][N] ints, "
                 "\"grads\": [N][M][D] numbers}\n",
                 argv[0]);
    return 2;
  }
  try {
    const std::string text = ReadInput(argv[1]);
    const std::string out = Replay(ReadCase(JsonReader(text).ReadDocument()));
    std::fputs(out.c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const InputError& e) {
    std::fprintf(stderr, "order_replay: %s: %s\n", argv[1], e.what());
    return 2;
  }
}
