/// One batch handed from a pipeline stage to its consumers.
///
/// A source numbers its batches from 0; every other stage hands on exactly one batch (possibly
/// empty) for each batch it takes, with the same number and position, so that a number means
/// the same slice of the source's input in every stage.
struct PipelineBatch<Element: Sendable>: Sendable {
    var elements: [Element]
    var sequence: Int
    /// Where the source is once this batch is done (nil for sources that cannot resume).
    var position: PipelinePosition?
}
