// Package train runs a training job on a parameter-server cluster around
// a model, as TensorFlow's MonitoredTrainingSession does. A Model is
// graphs: it builds them for the tasks it is given, initializes its
// variables and runs one step of a replica. A Session owns the job's
// life: it asks the tasks for their incarnations and creates their
// sessions, runs every replica's steps concurrently, calls the hooks
// after each step (CheckpointSaverHook saves every N global steps or S
// seconds and at the end), and, as asked, gives a lost worker's batches
// to the others, waits for a lost parameter server and restores the
// model from its newest checkpoint, and takes restarted tasks back in
// (PeerRejoiner finds them over the driver's tasks.Peers). Lost tasks are
// told apart by the driver's typed errors (*driver.TaskError,
// *driver.StepError), never by their text.
package train
