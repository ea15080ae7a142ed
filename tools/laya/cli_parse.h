// The one parser for numbers and id lists typed on the command line (issue 11).
// Every numeric option and every list goes through these pure functions, so a
// hostile value ("99999999999999999999", "1,,2", "nan", "0x10", " 5") fails the
// same way everywhere: a Status whose message names the option, shows the
// value and says what was expected. No exceptions, no locale, no I/O (so the
// functions are unit-tested and fuzzed: tests/cli_parse_test.cpp,
// fuzz/cli_numbers_fuzz.cpp).
//
// Accepted syntax, deliberately narrow:
//   integer: an optional '-', then decimal digits (no '+', no spaces, no hex,
//            no exponent, no fraction).
//   real:    an optional '-', digits with at most one '.', an optional
//            exponent (e/E, optional sign, digits); finite only (no nan/inf).
//   id list: integers separated by ',' (spaces around items allowed), or the
//            same inside one pair of brackets "[1, 2, 3]" (a JSON array).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace laya::cli {

// Integer in [lo, hi]. `what` names the option ("--ids", "-t") and starts the
// message: "-t: '100000' is out of range [0, 1024]".
Result<int64_t> parse_int(std::string_view what, std::string_view s, int64_t lo, int64_t hi);

// Finite real in [lo, hi] ("--temp: 'nan' is not a finite number").
Result<double> parse_real(std::string_view what, std::string_view s, double lo, double hi);

// Comma-separated ids, each in [lo, hi] ("--ids: empty item at position 2 in
// '1,,2'"). An empty list is an error: every caller needs at least one id.
Result<std::vector<int32_t>> parse_id_list(std::string_view what, std::string_view s, int64_t lo = 0,
                                           int64_t hi = INT32_MAX);

}  // namespace laya::cli
