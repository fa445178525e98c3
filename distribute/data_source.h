// DataDatasetSource: a data::Dataset (data/) as the DatasetSource a strategy distributes.
// `examples` is the unbatched pipeline (a reader and per-example transformations such as
// Shuffle or Normalize); for each worker the strategy's ShardSpec is applied to it
// (ShardFiles for FILE, Shard for DATA) and it is batched by the worker's share of the
// global batch, then prefetched.
//
// Note: distribute/ splits a global batch the way tf.distribute documents (replica r takes
// rows [r*p, (r+1)*p), p = global / replicas), not data::SplitBatch's even split, so that a
// partial batch of 6 over 2 replicas is [0,1,2,3] / [4,5] as in the reference.
// Thread model: the source may be used from any thread; each made iterator by one thread.
#ifndef LOCKSTEP_DISTRIBUTE_DATA_SOURCE_H_
#define LOCKSTEP_DISTRIBUTE_DATA_SOURCE_H_

#include <memory>

#include "data/dataset.h"
#include "distribute/distributed_dataset.h"

namespace lockstep::distribute {

DatasetSource DataDatasetSource(data::Dataset examples, bool drop_remainder = false);

// A batched data::DatasetIterator (each element a batch) as a BatchIterator.
std::unique_ptr<BatchIterator> AsBatchIterator(std::unique_ptr<data::DatasetIterator> batches);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DATA_SOURCE_H_
