#include "jobspec/test_jobs.h"

namespace lockstep::jobspec {

v1::JobSpec SmallCsvJob() {
  v1::JobSpec spec;
  spec.mutable_model()->add_input_shape(8);
  spec.mutable_model()->add_layers()->mutable_dense()->set_units(4);
  spec.mutable_model()->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  spec.mutable_optimizer()->mutable_sgd();
  spec.mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.1);
  spec.mutable_data()->mutable_train()->add_files("data/train.csv");
  spec.mutable_data()->mutable_train()->set_format(v1::DataSource::CSV);
  spec.mutable_data()->set_eval_fraction(0.2);
  spec.set_global_batch_size(64);
  spec.set_epochs(3);
  return spec;
}

}  // namespace lockstep::jobspec
