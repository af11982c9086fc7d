import { clusterSuite } from './cluster.js';
import { sentinelSuite } from './sentinel.js';

/**
 * The service on Redis as it runs in production, with real servers: Sentinel and Cluster, each
 * failing under load. One file, so that a machine without Redis's binaries prints one SKIPPED line.
 */
sentinelSuite();
clusterSuite();
