#include "tokenizer/normalizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "unicode/bytestream.h"
#include "unicode/normalizer2.h"
#include "unicode/stringpiece.h"
#include "unicode/utypes.h"

namespace dk::tokenizer {

absl::StatusOr<std::string> NfcNormalize(absl::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status) || nfc == nullptr) {
    return absl::InternalError(
        absl::StrCat("tokenizer: ICU has no NFC normalizer (", u_errorName(status), ")"));
  }
  const icu::StringPiece in(text.data(), static_cast<int32_t>(text.size()));
  if (nfc->isNormalizedUTF8(in, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  nfc->normalizeUTF8(/*options=*/0, in, sink, /*edits=*/nullptr, status);
  if (U_FAILURE(status)) {
    return absl::InternalError(
        absl::StrCat("tokenizer: NFC normalization failed (", u_errorName(status), ")"));
  }
  return out;
}

absl::StatusOr<std::string> Normalize(absl::Span<const NormalizerStep> steps,
                                      absl::string_view text) {
  std::string out(text);
  for (const NormalizerStep& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc: {
        absl::StatusOr<std::string> nfc = NfcNormalize(out);
        if (!nfc.ok()) return nfc.status();
        out = *std::move(nfc);
        break;
      }
      case NormalizerStep::Kind::kReplace:
        if (step.pattern.empty()) {
          return absl::InvalidArgumentError("tokenizer: a Replace normalizer has an empty pattern");
        }
        absl::StrReplaceAll({{step.pattern, step.content}}, &out);
        break;
    }
  }
  return out;
}

}  // namespace dk::tokenizer
