#include "dist/overflow_agreement.h"

#include "util/check.h"

namespace cg::dist {

void agree_on_overflow(nn::GradScaler& scaler, GradientComm& comm) {
  scaler.set_overflow_agreement([&comm](Tensor& found_inf) {
    CG_CHECK(found_inf.numel() == 1 && found_inf.dtype() == DType::f32,
             "DDP: found_inf {} must be one float32", found_inf.str());
    const Stream s = current_stream(found_inf.device());
    auto work = comm.all_reduce_average(found_inf, s, "found_inf");
    comm.wait(*work, s);
  });
}

}  // namespace cg::dist
