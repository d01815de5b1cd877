// Package ops holds the op kernels a worker runs, the registry that maps op
// names to them, and the variables they share across steps.
//
// A graph executor (package graph) looks an op up with Lookup, fills in its
// Spec's attribute defaults, and calls Build with the task's Env and the
// node: Build checks the attributes and inputs once, at RegisterGraph, and
// returns a Kernel. Each step then runs the kernel with a Context holding
// the node's inputs and outputs in that step.
//
// The ops, a file per family: Const, Placeholder, _Arg, _Retval, Identity,
// IdentityN, StopGradient, NoOp, Shape, Size, Reshape, ZerosLike, Fill,
// Range (basic.go); _Send, _Recv, _HostSend, _HostRecv (sendrecv.go);
// VarHandleOp, VariableV2, ReadVariableOp, Assign, AssignAdd, AssignSub,
// AssignVariableOp, AssignAddVariableOp, AssignSubVariableOp,
// VarIsInitializedOp, IsVariableInitialized, ApplyGradientDescent,
// ResourceApplyGradientDescent (variable_ops.go); ApplyAdam,
// ResourceApplyAdam, SparseApplyAdam, ResourceSparseApplyAdam,
// ApplyMomentum, ResourceApplyMomentum, SparseApplyMomentum,
// ResourceSparseApplyMomentum, ApplyAdagrad, ResourceApplyAdagrad
// (optimizers.go); Switch, RefSwitch, Merge, RefMerge (control.go); GatherV2, ResourceGather,
// ResourceScatterAdd, ResourceSparseApplyAdagrad (sparse.go);
// RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt
// and their Stateless forms, TensorFlow's Philox streams bit for bit
// (random*.go); Cast
// (cast.go); ConcatV2, Pack, Unpack (concat.go); Slice, StridedSlice
// (slice.go); DynamicPartition, DynamicStitch, ParallelDynamicStitch
// (partition.go); Unique, UnsortedSegmentSum (segment.go); Less,
// LessEqual, Greater, GreaterEqual, Equal, NotEqual (compare.go); SaveV2,
// RestoreV2, MergeV2Checkpoints (checkpoint.go); ShardedFilename,
// ShardedFilespec, StringJoin (strings.go); RegexFullMatch,
// StaticRegexFullMatch, Select, SelectV2, PlaceholderWithDefault
// (select.go); MatMul, Add, AddV2, Sub, Mul, RealDiv,
// Maximum, Minimum, FloorDiv, FloorMod (with broadcasting), Neg, Sigmoid,
// SigmoidGrad, Log, Log1p, Exp, Square, Sqrt, Rsqrt, Sum, Mean (math.go);
// MutableHashTableV2, MutableHashTableOfTensorsV2, MutableDenseHashTableV2
// (lookup_table.go), LookupTableFindV2, LookupTableInsertV2,
// LookupTableRemoveV2, LookupTableSizeV2, LookupTableExportV2,
// LookupTableImportV2 (lookup_ops.go); KvVarHandleOp,
// InitializeKvVariableOp, KvVarIsInitializedOp, KvResourceGather,
// KvResourceSparseApplyAdagrad (kv_variable.go, DeepRec's embedding
// variables over package embedding); ExpandDims (expanddims.go). Also
// ResourceScatterSub (scatter.go) and Pow (pow.go), which TensorFlow 2's
// optimizers run on a ps.
// Arithmetic supports DT_FLOAT, DT_DOUBLE, DT_INT32 and DT_INT64; ops that
// only move elements (concatenation, slicing, partitioning, gathers) take
// any fixed-size dtype; Pack and Select take strings too. Names lists the
// ops at run time.
//
// # Dtypes
//
// A kernel picks its code for its node's dtype once, when it is built:
// dtype.go's byDType tables map each dtype an op supports to one
// instantiation of a generic function over a type set (numeric, floating,
// the cast types), and a dtype missing from the table is refused there,
// naming the types the op takes. Kernels whose dtype is a variable's
// (elementwise updates, gradient descent) look it up in the same table
// when they run.
//
// # Ownership and concurrency
//
// A kernel owns nothing between runs; one kernel may run in several steps
// at once. Outputs it sets own a Buf reference each, which the step
// releases; inputs are read only. Variables live in the Env's Variables,
// across steps and graphs, and are shared by concurrent steps: dense
// updates take a variable's lock for writing, sparse row updates take it
// for reading plus a striped per-row lock, so updates of distinct rows run
// in parallel and updates of one row add up exactly (see variable).
//
// # Checkpoints
//
// SaveV2, RestoreV2 and MergeV2Checkpoints write and read TensorFlow's
// checkpoint format (package checkpoint) under Env.CheckpointDir, so that
// a restarted parameter server resumes, and TensorFlow's Saver graphs,
// sharded or not, save and restore on it: relative prefixes lie under the
// directory, absolute ones must lie inside it (see resolvePrefix).
package ops
