import { createRegistry, type DescFile, type DescService, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { Code, type ServiceImpl } from '@connectrpc/connect';
import type {
  ServerReflectionRequest,
  ServerReflectionResponseSchema,
  ServerReflection as V1,
} from './generated/grpc/reflection/v1/reflection_pb.js';
import type { ServerReflection as V1Alpha } from './generated/grpc/reflection/v1alpha/reflection_pb.js';

type Answer = MessageInitShape<typeof ServerReflectionResponseSchema>;

/** Each file by its name, with every file it imports. */
function withImports(files: readonly DescFile[], into = new Map<string, DescFile>()): Map<string, DescFile> {
  for (const file of files) {
    if (into.has(file.name)) continue;
    into.set(file.name, file);
    withImports(file.dependencies, into);
  }
  return into;
}

const serialised = (file: DescFile): Uint8Array[] =>
  [...withImports([file]).values()].map((one) => toBinary(FileDescriptorProtoSchema, one.proto));

const notFound = (message: string): Answer['messageResponse'] => ({
  case: 'errorResponse',
  value: { errorCode: Code.NotFound, errorMessage: message },
});

/**
 * Server reflection (`grpc.reflection.v1` and `v1alpha`, the same messages) of `services`: what
 * grpcurl, buf curl and Postman ask to list the services and read their definitions. The answers
 * are made once per question; the files come from the code generated from the `.proto` files.
 */
export function reflectionService(
  services: readonly DescService[],
): ServiceImpl<typeof V1> & ServiceImpl<typeof V1Alpha> {
  const byName = withImports(services.map((service) => service.file));
  const registry = createRegistry(...byName.values());
  const listed: Answer['messageResponse'] = {
    case: 'listServicesResponse',
    value: {
      service: services.map((service) => ({ name: service.typeName })),
    },
  };
  const files = (file: DescFile | undefined, missing: string): Answer['messageResponse'] =>
    file === undefined
      ? notFound(missing)
      : {
          case: 'fileDescriptorResponse',
          value: { fileDescriptorProto: serialised(file) },
        };
  const fileOfSymbol = (symbol: string): DescFile | undefined => {
    const found = registry.get(symbol);
    if (found !== undefined) return found.file;
    // A method or a field: its parent's file.
    const parent = symbol.slice(0, Math.max(0, symbol.lastIndexOf('.')));
    return parent === '' ? undefined : registry.get(parent)?.file;
  };
  const answer = (request: Pick<ServerReflectionRequest, 'messageRequest'>): Answer['messageResponse'] => {
    const asked = request.messageRequest;
    switch (asked.case) {
      case 'listServices':
        return listed;
      case 'fileByFilename':
        return files(byName.get(asked.value), `no file ${asked.value}`);
      case 'fileContainingSymbol':
        return files(fileOfSymbol(asked.value), `no symbol ${asked.value}`);
      case 'allExtensionNumbersOfType':
        return registry.getMessage(asked.value) === undefined
          ? notFound(`no type ${asked.value}`)
          : {
              case: 'allExtensionNumbersResponse',
              value: {
                baseTypeName: asked.value,
                extensionNumber: [],
              },
            };
      default:
        return notFound('no extensions are defined');
    }
  };
  return {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        yield {
          validHost: request.host,
          originalRequest: request,
          messageResponse: answer(request as ServerReflectionRequest),
        };
      }
    },
  } as ServiceImpl<typeof V1> & ServiceImpl<typeof V1Alpha>;
}
