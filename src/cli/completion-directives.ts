/**
 * The directive that ends every `__complete` answer (Cobra's protocol, which kubectl
 * parses for its plugins): bits telling the shell what to do besides the candidates.
 * Its own module so that the `completion` command (which the command list loads) and
 * the candidate finder (which reads the command list) share it without importing
 * each other.
 */
export const DIRECTIVE_DEFAULT = 0;
/** Show nothing. */
export const DIRECTIVE_ERROR = 1;
/** No file names when there is no candidate. */
export const DIRECTIVE_NO_FILE_COMPLETION = 4;
