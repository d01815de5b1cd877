// Package train carries a training job's life around its model, as
// TensorFlow's MonitoredTrainingSession does: hooks called after each step
// (CheckpointSaverHook saves every N global steps or S seconds, once more
// at the end, and checks before the first step that every parameter server
// can save), and the finding again of tasks that were lost (PeerRejoiner,
// over the driver's tasks.Peers). The model is a Checkpointer: it saves and
// restores its own variables; the session decides when.
package train
