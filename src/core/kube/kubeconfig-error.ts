/** A kubeconfig that cannot be used (missing context, unsupported auth, unreadable file, failing plugin, …). */
export class KubeconfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KubeconfigError';
  }
}
