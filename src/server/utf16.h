// LSP positions <-> offsets in a UTF-8 document.
//
// An LSP position is {line, character}: `character` counts code units of the
// position encoding agreed in `initialize` (UTF-16 unless the client offers
// another: an emoji is 2 UTF-16 units, 4 UTF-8 units, 1 UTF-32 unit). Sessions
// count code points, documents are stored as UTF-8, so both offsets are given.
//
// Lines end at "\n", "\r\n" or "\r" (the spec's three end-of-line sequences).
//
// Clamping (never an error, so a stale or sloppy position from an editor still
// lands somewhere sensible):
//   - `character` past the end of its line: the end of the line (before its
//     line break), as the spec says;
//   - `line` past the last line: the end of the document;
//   - a position inside a character (between the two halves of a UTF-16
//     surrogate pair, or inside a UTF-8 sequence): the start of that
//     character. We clamp rather than refuse because an insertion there has
//     no other sensible meaning and a refused didChange (a notification: no
//     reply possible) would leave the document out of sync.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace laya::lsp {

enum class PositionEncoding { kUtf8, kUtf16, kUtf32 };

// "utf-8", "utf-16", "utf-32" (the spec's PositionEncodingKind strings).
const char* encoding_name(PositionEncoding e);
std::optional<PositionEncoding> parse_encoding(std::string_view name);

struct Position {
  int64_t line = 0;
  int64_t character = 0;  // code units of the encoding
};

// A place in the document: its byte offset and its code point offset.
struct TextOffset {
  size_t byte = 0;
  size_t cp = 0;
};

// Where a line starts (a known line start to scan from: see LineCache).
struct LineStart {
  int64_t line = 0;
  size_t byte = 0;
  size_t cp = 0;
};

// Code units of one UTF-8 sequence starting with lead byte `lead` in `enc`.
size_t units_of_lead(unsigned char lead, PositionEncoding enc);
// Code units of valid UTF-8 `s` in `enc`.
size_t units_of(std::string_view s, PositionEncoding enc);

// The offset of position `p` in valid UTF-8 `text`, clamped as described
// above (negative line or character: 0). `from` (optional) is a known line
// start at or before p.line: the scan starts there instead of at the top.
TextOffset offset_of(std::string_view text, Position p, PositionEncoding enc, const LineStart* from = nullptr);

// The start of line `line` (clamped: the last line's start past the end).
LineStart line_start(std::string_view text, int64_t line, const LineStart* from = nullptr);

// The position of byte offset `byte` (a character boundary of valid UTF-8
// `text`; clamped to its size).
Position position_of(std::string_view text, size_t byte, PositionEncoding enc, const LineStart* from = nullptr);

}  // namespace laya::lsp
